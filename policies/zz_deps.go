package policies

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/open-policy-agent/opa/v1/ast"
	_ "github.com/open-policy-agent/opa/v1/rego"
	_ "github.com/open-policy-agent/opa/v1/tester"
	_ "github.com/open-policy-agent/opa/v1/topdown"
)
