// Wrapper module (tools-module pattern) that builds the Pulumi CLI in module
// mode. tools/build-pulumi.sh adds the pulumi requirements at the version
// pinned in requirements.txt (`pulumi==`), so the version lives in one place.
module mirrorstack.local/tools/pulumi-cli

go 1.24

// From github.com/pulumi/pulumi/pkg/v3's own go.mod (replace directives of a
// dependency are ignored, so the fork pulumi's release links is named here).
replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
