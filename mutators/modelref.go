package mutators

import (
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
)

// ModelReference is a model that a container's command line or
// environment names for its engine to serve.
type ModelReference struct {
	// Value is the model as written there: a Hub repository id or a path.
	Value string
	// Source is where it is named, as the user wrote it: the flag
	// (--model, --model-id, --model-path), "vllm serve" or "env MODEL_ID".
	Source string
}

// modelFlags are the engines' flags that name the model to serve: vLLM's
// --model (SGLang takes it too), SGLang's --model-path, Text Generation
// Inference's --model-id and Triton's --model-repository (or
// --model-store), the directory of its models. Flags that name something
// else about the model (vLLM's --served-model-name, --model-impl, ...) are
// not them.
var modelFlags = []string{"--model", "--model-path", "--model-id", "--model-repository", "--model-store"}

// Where else a model is named.
const (
	// vllmServe is vLLM's CLI naming the model as the argument after
	// "serve": vllm serve org/model.
	vllmServe = "vllm serve"
	// sglangServe is SGLang's CLI, which takes the model the same way:
	// sglang serve org/model (python/sglang/cli/serve.py).
	sglangServe = "sglang serve"
	// modelIDEnv is the variable Text Generation Inference's launcher
	// reads for --model-id.
	modelIDEnv = "MODEL_ID"
)

// ModelReferences returns the models a container names: in its command and
// args (vllm serve X and sglang serve X, with the flags before X skipped,
// --model X or --model=X, --model-path, --model-id),
// and in its environment (MODEL_ID), in that order, each once.
//
// Every command and argument is split on white space, so that a shell
// script (sh -c "... vllm serve X ...") is read like separate arguments;
// quotes around a word and a ';' after it are dropped. $(VAR) references
// are expanded as the kubelet does, from the variables the container sets
// in env with a plain value. A word that still holds a '$' (a shell
// variable, a reference to a variable set elsewhere) is unknown and names
// nothing, and neither does a word that starts with '-' or holds a shell
// operator.
func ModelReferences(command, args []string, env []corev1.EnvVar) []ModelReference {
	vars := plainEnv(env)
	words := splitWords(command, args, vars)

	var out []ModelReference
	add := func(value, source string) {
		r := ModelReference{Value: value, Source: source}
		if namesModel(value) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	next := func(i int) string {
		if i+1 < len(words) && words[i+1].known {
			return words[i+1].s
		}
		return ""
	}
	for i, w := range words {
		if !w.known {
			continue
		}
		for _, cli := range []string{vllmServe, sglangServe} {
			prog, sub, _ := strings.Cut(cli, " ")
			if (w.s == prog || strings.HasSuffix(w.s, "/"+prog)) && next(i) == sub {
				if j := positional(words, i+2); j >= 0 {
					add(words[j].s, cli)
				}
			}
		}
		for _, flag := range modelFlags {
			if w.s == flag {
				add(next(i), flag)
			} else if v, ok := strings.CutPrefix(w.s, flag+"="); ok {
				add(unquote(v), flag)
			}
		}
	}
	for _, v := range env {
		if v.Name == modelIDEnv && v.ValueFrom == nil {
			if s, ok := expand(v.Value, vars); ok {
				add(s, "env "+modelIDEnv)
			}
		}
	}
	return out
}

// noValueFlags are flags of vLLM's and SGLang's serve that take no value,
// among those manifests put before the model (a --no-... flag takes none
// either).
var noValueFlags = []string{"--trust-remote-code", "--enable-chunked-prefill", "--enforce-eager", "--headless",
	"--enable-prefix-caching", "--disable-log-requests", "--disable-log-stats", "--enable-auto-tool-choice",
	"--enable-lora", "--enable-metrics", "--skip-server-warmup", "--async-scheduling"}

// positional is the index of the first positional word of a command from
// from on (the model of vllm serve and sglang serve), skipping flags and
// their values as argparse does: --flag=v, a flag above or a --no-...
// flag takes no value, and any other flag the word after it unless that
// is a flag too. -1 when there is none, or when a word only the running
// container knows stands before it.
func positional(words []word, from int) int {
	for i := from; i < len(words); i++ {
		w := words[i]
		switch {
		case isSeparator(w.s) || !w.known:
			return -1
		case !strings.HasPrefix(w.s, "-"):
			return i
		case w.ends:
			return -1
		case strings.Contains(w.s, "=") || slices.Contains(noValueFlags, w.s) || strings.HasPrefix(w.s, "--no-"):
		case i+1 < len(words) && !strings.HasPrefix(words[i+1].s, "-"):
			if words[i+1].ends {
				return -1
			}
			i++ // the flag's value
		}
	}
	return -1
}

// word is one white-space separated word of a command line, expanded;
// known is false when it holds what only the running container knows, and
// ends is true when a ';' after it ends a shell command.
type word struct {
	s     string
	known bool
	ends  bool
}

func newWord(f string, vars plainEnv) word {
	s, ok := expand(unquote(strings.TrimRight(f, ";")), vars)
	return word{s: s, known: ok, ends: strings.HasSuffix(f, ";")}
}

// splitWords splits a command line into words: every command and argument
// on white space, so that a shell script reads like separate arguments.
func splitWords(command, args []string, vars plainEnv) []word {
	var words []word
	for _, arg := range slices.Concat(command, args) {
		for _, f := range strings.Fields(arg) {
			words = append(words, newWord(f, vars))
		}
	}
	return words
}

// unquote drops the quotes around a word.
func unquote(s string) string {
	return strings.Trim(s, `"'`)
}

// expand replaces each $(NAME) with the variable's value, as the kubelet
// expands command and args. ok is false when a '$' is left: a reference it
// cannot resolve, "$$" (a literal '$' for the shell) or a shell variable.
func expand(s string, vars plainEnv) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		if !strings.HasPrefix(s[i+1:], "(") {
			return "", false
		}
		end := strings.IndexByte(s[i+2:], ')')
		if end < 0 {
			return "", false
		}
		v, ok := vars.get(s[i+2 : i+2+end])
		if !ok || strings.Contains(v, "$") {
			return "", false
		}
		b.WriteString(v)
		i += 2 + end
	}
	return b.String(), true
}

// namesModel reports whether a word can be a model's name or path: not
// empty, not a flag, without white space, control characters or shell
// operators.
func namesModel(s string) bool {
	return s != "" && !strings.HasPrefix(s, "-") && !strings.ContainsAny(s, "&|;<>()`$") &&
		!strings.ContainsFunc(s, isSpace)
}

func isSpace(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r)
}
