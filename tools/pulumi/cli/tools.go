//go:build tools

// Package tools pins the CLI's main package as a dependency of this module.
package tools

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
)
