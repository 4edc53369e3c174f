package main

import (
	"strconv"
	"strings"
)

// flagSpec is how an engine's command line is split into flags and
// positional words. The stand-in reads a few flags (valued, multi) and
// skips the rest: a flag it does not read takes the next word as its
// value unless it is known to take none (isBool), the word is itself a
// flag, or the value is attached (--flag=value).
type flagSpec struct {
	prog   string
	valued map[string]bool        // flags read, which must have one value
	multi  map[string]bool        // flags read, with one or more values (argparse nargs="+")
	repeat map[string]bool        // flags read, one value a use, every use kept
	isBool func(name string) bool // flags known to take no value
	norm   func(name string) string
}

// scanned is a command line split by a flagSpec.
type scanned struct {
	flags map[string][]string // by normalized name: the values of its last use (every use's, for repeat)
	pos   []string
}

// last is the value of a flag's last use, or "".
func (s scanned) last(name string) string {
	if v := s.flags[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (f flagSpec) scan(args []string) (scanned, error) {
	s := scanned{flags: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			s.pos = append(s.pos, args[i+1:]...)
			break
		}
		if !isFlag(a) {
			s.pos = append(s.pos, a)
			continue
		}
		name, val, attached := strings.Cut(a, "=")
		if f.norm != nil {
			name = f.norm(name)
		}
		switch {
		case f.repeat[name] && attached:
			s.flags[name] = append(s.flags[name], val)
		case f.repeat[name]:
			if i+1 >= len(args) || isFlag(args[i+1]) {
				return s, usage(f.prog, "argument %s: expected one argument", name)
			}
			i++
			s.flags[name] = append(s.flags[name], args[i])
		case attached:
			s.flags[name] = []string{val}
		case f.multi[name]:
			var vals []string
			for i+1 < len(args) && !isFlag(args[i+1]) {
				i++
				vals = append(vals, args[i])
			}
			if len(vals) == 0 {
				return s, usage(f.prog, "argument %s: expected at least one argument", name)
			}
			s.flags[name] = vals
		case f.valued[name]:
			if i+1 >= len(args) || isFlag(args[i+1]) {
				return s, usage(f.prog, "argument %s: expected one argument", name)
			}
			i++
			s.flags[name] = []string{args[i]}
		case f.isBool != nil && f.isBool(name):
			s.flags[name] = nil
		case i+1 < len(args) && !isFlag(args[i+1]):
			i++ // an unknown flag's value
		}
	}
	return s, nil
}

// isFlag tells a flag from a value as argparse does: a word starting with
// - that is not a negative number.
func isFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a, 64)
	return err != nil
}

// setOf makes a set of strings.
func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}
