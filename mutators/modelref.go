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
// --model (SGLang takes it too), SGLang's --model-path and Text
// Generation Inference's --model-id. Flags that name something else about
// the model (vLLM's --served-model-name, --model-impl, ...) are not them.
var modelFlags = []string{"--model", "--model-path", "--model-id"}

// Where else a model is named.
const (
	// vllmServe is vLLM's CLI naming the model as the argument after
	// "serve": vllm serve org/model.
	vllmServe = "vllm serve"
	// modelIDEnv is the variable Text Generation Inference's launcher
	// reads for --model-id.
	modelIDEnv = "MODEL_ID"
)

// ModelReferences returns the models a container names: in its command and
// args (vllm serve X, --model X or --model=X, --model-path, --model-id),
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
		if (w.s == "vllm" || strings.HasSuffix(w.s, "/vllm")) && next(i) == "serve" {
			add(next(i+1), vllmServe)
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
