package aiinference

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/internal/enginefacts"
)

// TestPresetsAreTheTables holds DefaultEngines to the engine table
// (internal/enginefacts/engines.yaml): each preset names an image of the
// engine's release there, starts it with one of its command lines (the
// image's entrypoint when the preset gives no command), gives the model as
// that command line takes it, and passes only flags the table holds, none
// deprecated, with the port on the engine's port flag.
func TestPresetsAreTheTables(t *testing.T) {
	table, err := enginefacts.Load()
	if err != nil {
		t.Fatal(err)
	}
	for name, preset := range DefaultEngines {
		t.Run(string(name), func(t *testing.T) {
			engines := table.Annotated(string(name))
			if len(engines) != 1 {
				t.Fatalf("the table has %d engines for %s, want 1", len(engines), name)
			}
			e := engines[0]
			i := slices.IndexFunc(e.Images, func(i enginefacts.Image) bool { return i.Ref == preset.Image })
			if i < 0 {
				t.Fatalf("image %s is not among the table's images of %s %s", preset.Image, e.Name, e.Release)
			}
			argv := preset.Command
			if len(argv) == 0 {
				argv = e.Images[i].Entrypoint
			}
			c := slices.IndexFunc(e.Commands, func(c enginefacts.Command) bool { return slices.Equal(c.Argv, argv) })
			if c < 0 {
				t.Fatalf("%q starts %s, which is none of the table's commands", argv, e.Name)
			}
			cmd := e.Commands[c]
			args := preset.Args
			if cmd.Model == enginefacts.ModelPositional {
				if len(args) == 0 || args[0] != "{{model}}" {
					t.Errorf("%q takes the model as its first argument; the preset's arguments are %q", argv, args)
				}
				args = args[1:]
			} else if j := slices.Index(args, cmd.Model); j < 0 || j+1 >= len(args) || args[j+1] != "{{model}}" {
				t.Errorf("%q takes the model with %s; the preset's arguments are %q", argv, cmd.Model, args)
			}
			portFlags := e.FlagNames(enginefacts.RolePort)
			if j := slices.Index(args, "{{port}}"); j < 1 || !slices.Contains(portFlags, args[j-1]) {
				t.Errorf("the preset passes {{port}} in %q, not after %s's port flag %v", args, e.Name, portFlags)
			}
			for _, a := range args {
				if !strings.HasPrefix(a, "-") {
					continue
				}
				f, ok := e.Flag(a)
				switch {
				case !ok:
					t.Errorf("flag %s is not in the table for %s: add it with its source, or drop it", a, e.Name)
				case f.Deprecated != "":
					t.Errorf("flag %s is deprecated in %s: %s", a, e.Name, f.Deprecated)
				case f.Role == enginefacts.RoleModel && cmd.Model == enginefacts.ModelPositional:
					t.Errorf("%q takes the model positionally; the preset also passes %s", argv, a)
				}
			}
		})
	}
}
