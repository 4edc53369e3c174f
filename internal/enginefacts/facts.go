package enginefacts

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed engines.yaml
var tableYAML []byte

// Table is engines.yaml.
type Table struct {
	Engines []Engine `json:"engines"`
}

// Engine is one engine (or a component of one: Dynamo's frontend and
// workers, llm-d's routing sidecar) at one release.
type Engine struct {
	// Name is the table's name for it.
	Name string `json:"name"`
	// Annotation is the modelgate.io/engine value that selects it; empty
	// for a sidecar, which is never the serving container.
	Annotation string `json:"annotation"`
	// SidecarOf names the engine a sidecar sits in front of.
	SidecarOf string `json:"sidecarOf,omitempty"`
	// Repository is where its sources are.
	Repository string `json:"repository"`
	// Release is the release the presets name (the images' tag).
	Release string `json:"release"`
	// Released is how that release was found to exist, and when.
	Released string `json:"released"`
	// Read is the tag or commits whose files the facts were read from.
	Read string `json:"read"`
	// Checked is the date the facts were read.
	Checked   string     `json:"checked"`
	Images    []Image    `json:"images"`
	Commands  []Command  `json:"commands"`
	Flags     []Flag     `json:"flags"`
	Variables []Variable `json:"variables,omitempty"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Image is a published image of the engine's release.
type Image struct {
	// Ref is the image reference, tag included.
	Ref string `json:"ref"`
	// Entrypoint is the image's ENTRYPOINT; empty when it sets none (the
	// manifest's command starts the engine).
	Entrypoint []string `json:"entrypoint"`
	// Env is what the image's ENV sets that the engine reads.
	Env            map[string]string `json:"env,omitempty"`
	Source         string            `json:"source"`
	Variants       string            `json:"variants,omitempty"`
	VariantsSource string            `json:"variantsSource,omitempty"`
}

// Tag is the image's tag.
func (i Image) Tag() string {
	if j := strings.LastIndexByte(i.Ref, ':'); j > strings.LastIndexByte(i.Ref, '/') {
		return i.Ref[j+1:]
	}
	return ""
}

// Command is a command line that starts the engine.
type Command struct {
	Argv []string `json:"argv"`
	// Model is how this command line takes the model: "positional", a
	// flag, or empty when not read.
	Model  string `json:"model,omitempty"`
	Source string `json:"source"`
}

// ModelPositional is Command.Model for a model given as the first
// positional argument.
const ModelPositional = "positional"

// Roles of flags, variables and endpoints.
const (
	RolePort             = "port"              // the HTTP serving port
	RoleHost             = "host"              // the address the server binds
	RoleModel            = "model"             // the model to serve
	RoleTensorParallel   = "tensor-parallel"   // GPUs a model is split over
	RolePipelineParallel = "pipeline-parallel" // pipeline stages, times tensor-parallel GPUs
	RoleDownloadDir      = "download-dir"      // where downloads go
	RoleLoadFormat       = "load-format"       // how weights are read
	RoleServedModelName  = "served-model-name" // the name the API serves
	RoleRevision         = "revision"          // the model's revision
	RoleDiscovery        = "discovery"         // how components find each other
	RoleEnginePort       = "engine-port"       // a sidecar's port of the engine behind it
	RoleStatusPort       = "status-port"       // a worker's status server port
	RoleStatusEnabled    = "status-enabled"    // turns a worker's status server on
	RoleReadiness        = "readiness"         // the endpoint modelgate's probes check
	RoleModelReadiness   = "model-readiness"   // readiness of one model ({model} in the path)
	RoleModels           = "models"            // the model list
	RoleAlias            = "alias"             // another health endpoint
)

var flagRoles = []string{RolePort, RoleHost, RoleModel, RoleTensorParallel, RolePipelineParallel, RoleDownloadDir,
	RoleLoadFormat, RoleServedModelName, RoleRevision, RoleDiscovery, RoleEnginePort}

var variableRoles = []string{RoleStatusPort, RoleStatusEnabled}

var endpointRoles = []string{RoleReadiness, RoleModelReadiness, RoleModels, RoleAlias}

// Flag is a command-line flag modelgate writes or reads.
type Flag struct {
	// Names are the flag and its aliases, the canonical one first.
	Names []string `json:"names"`
	Role  string   `json:"role"`
	// Env is the variable the engine reads when the flag is not given.
	Env     string `json:"env,omitempty"`
	Default string `json:"default,omitempty"`
	// Values are the accepted values, when the engine lists them.
	Values []string `json:"values,omitempty"`
	// Streams are the load formats that read the model from its source
	// (object storage) themselves.
	Streams []string `json:"streams,omitempty"`
	// Deprecated says how, since when and where, when it is.
	Deprecated string `json:"deprecated,omitempty"`
	Source     string `json:"source"`
}

// Variable is an environment variable modelgate reads that has no flag.
type Variable struct {
	Name       string `json:"name"`
	Role       string `json:"role"`
	Default    string `json:"default,omitempty"`
	Deprecated string `json:"deprecated,omitempty"`
	Source     string `json:"source"`
}

// Endpoint is an HTTP endpoint of the engine.
type Endpoint struct {
	Path string `json:"path"`
	Role string `json:"role"`
	// Port is the role of the flag or variable that sets its port; empty
	// for the serving port.
	Port string `json:"port,omitempty"`
	// Ready is the status code when the engine serves.
	Ready int `json:"ready"`
	// Unready says what it answers before.
	Unready string `json:"unready,omitempty"`
	Source  string `json:"source"`
}

// Load parses engines.yaml and checks it (see Table.Validate).
func Load() (*Table, error) {
	var t Table
	if err := yaml.UnmarshalStrict(tableYAML, &t); err != nil {
		return nil, fmt.Errorf("engines.yaml: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("engines.yaml: %w", err)
	}
	return &t, nil
}

// Validate checks that every engine has its release, sources and one
// readiness endpoint, that every fact names its source and a known role,
// and that names are unique.
func (t *Table) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range t.Engines {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("engine %q: %s", e.Name, fmt.Sprintf(format, a...)))
		}
		if e.Name == "" || seen[e.Name] {
			bad("the name must be set and unique")
		}
		seen[e.Name] = true
		for field, v := range map[string]string{"repository": e.Repository, "release": e.Release,
			"released": e.Released, "read": e.Read, "checked": e.Checked} {
			if v == "" {
				bad("%s is required", field)
			}
		}
		if (e.Annotation == "") == (e.SidecarOf == "") {
			bad("exactly one of annotation and sidecarOf is set")
		}
		if len(e.Images) == 0 || len(e.Commands) == 0 {
			bad("needs at least one image and one command")
		}
		for _, i := range e.Images {
			if i.Source == "" || i.Tag() != e.Release && !strings.HasPrefix(i.Tag(), e.Release+"-") {
				bad("image %q needs a source and the release's tag %q", i.Ref, e.Release)
			}
		}
		for _, c := range e.Commands {
			if len(c.Argv) == 0 || c.Source == "" {
				bad("command %q needs argv and a source", c.Argv)
			}
		}
		for _, f := range e.Flags {
			if len(f.Names) == 0 || f.Source == "" || !slices.Contains(flagRoles, f.Role) {
				bad("flag %q needs names, a source and one of the roles %s", f.Names, strings.Join(flagRoles, ", "))
			}
			for _, s := range f.Streams {
				if !slices.Contains(f.Values, s) {
					bad("flag %q streams %q, which is not among its values", f.Names, s)
				}
			}
		}
		for _, v := range e.Variables {
			if v.Name == "" || v.Source == "" || !slices.Contains(variableRoles, v.Role) {
				bad("variable %q needs a name, a source and one of the roles %s", v.Name, strings.Join(variableRoles, ", "))
			}
		}
		readiness := 0
		for _, p := range e.Endpoints {
			if !strings.HasPrefix(p.Path, "/") || p.Source == "" || p.Ready == 0 || !slices.Contains(endpointRoles, p.Role) {
				bad("endpoint %q needs a path, a source, its ready status and one of the roles %s", p.Path, strings.Join(endpointRoles, ", "))
			}
			if p.Role == RoleReadiness {
				readiness++
			}
		}
		if e.Annotation != "" && readiness != 1 {
			bad("has %d readiness endpoints, want 1", readiness)
		}
	}
	return errors.Join(errs...)
}

// Engine returns the engine the table calls name.
func (t *Table) Engine(name string) (Engine, bool) {
	i := slices.IndexFunc(t.Engines, func(e Engine) bool { return e.Name == name })
	if i < 0 {
		return Engine{}, false
	}
	return t.Engines[i], true
}

// Annotated returns the engines modelgate.io/engine: annotation selects.
func (t *Table) Annotated(annotation string) []Engine {
	var out []Engine
	for _, e := range t.Engines {
		if e.Annotation == annotation {
			out = append(out, e)
		}
	}
	return out
}

// FlagsWith returns the engine's flags with the role.
func (e Engine) FlagsWith(role string) []Flag {
	var out []Flag
	for _, f := range e.Flags {
		if f.Role == role {
			out = append(out, f)
		}
	}
	return out
}

// FlagNames returns every name of the engine's flags with the role.
func (e Engine) FlagNames(role string) []string {
	var out []string
	for _, f := range e.FlagsWith(role) {
		out = append(out, f.Names...)
	}
	return out
}

// Flag returns the engine's flag one of whose names is name.
func (e Engine) Flag(name string) (Flag, bool) {
	for _, f := range e.Flags {
		if slices.Contains(f.Names, name) {
			return f, true
		}
	}
	return Flag{}, false
}

// Variable returns the engine's variable with the role.
func (e Engine) Variable(role string) (Variable, bool) {
	i := slices.IndexFunc(e.Variables, func(v Variable) bool { return v.Role == role })
	if i < 0 {
		return Variable{}, false
	}
	return e.Variables[i], true
}

// Endpoint returns the engine's endpoint with the role (the first).
func (e Engine) Endpoint(role string) (Endpoint, bool) {
	i := slices.IndexFunc(e.Endpoints, func(p Endpoint) bool { return p.Role == role })
	if i < 0 {
		return Endpoint{}, false
	}
	return e.Endpoints[i], true
}

// DefaultPort is the serving port the engine listens on when nothing sets
// it: its image's variable for the port flag, else the flag's default.
func (e Engine) DefaultPort() string {
	flags := e.FlagsWith(RolePort)
	if len(flags) == 0 {
		return ""
	}
	f := flags[0]
	for _, i := range e.Images {
		if v, ok := i.Env[f.Env]; ok && f.Env != "" {
			return v
		}
	}
	return f.Default
}
