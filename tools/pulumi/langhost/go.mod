// Wrapper module that builds the Python language host, pulumi-language-python.
//
// Since sdk v3.80 the host is its own untagged module,
// github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3, and the
// Go module proxy reachable here answers 403 for every version of it. v3.79.0
// is the newest release whose sdk/v3 module still carries the host, so it is
// pinned here on purpose, apart from the CLI version (see README, "Engine").
module mirrorstack.local/tools/pulumi-langhost

go 1.24

// From github.com/pulumi/pulumi/sdk/v3@v3.79.0's own go.mod.
replace golang.org/x/text => golang.org/x/text v0.3.6

require github.com/pulumi/pulumi/sdk/v3 v3.79.0
