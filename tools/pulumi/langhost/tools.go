//go:build tools

// Package tools pins the language host's main package as a dependency.
package tools

import (
	_ "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
)
