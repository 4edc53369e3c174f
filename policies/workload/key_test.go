package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// fullView is a View with every field set: pointers allocated, slices and
// maps of two, scalars from the field path.
func fullView(t *testing.T) *View {
	t.Helper()
	var v View
	fill(reflect.ValueOf(&v).Elem(), "v")
	return &v
}

// mutation is one change to a View, at a path.
type mutation struct {
	path   string
	change func(v reflect.Value) // applied to the value at path in a copy
	steps  []int                 // field or element indexes from the root
}

// mutations lists a change of every field under v: a scalar changed, a
// pointer, map or slice made nil, empty or longer, and every field of what
// they hold changed in turn.
func mutations(v reflect.Value, path string, steps []int) []mutation {
	at := func(name string, change func(reflect.Value)) mutation {
		return mutation{path: path + " " + name, change: change, steps: append([]int(nil), steps...)}
	}
	var out []mutation
	switch v.Kind() {
	case reflect.String:
		out = append(out, at("changed", func(x reflect.Value) { x.SetString(x.String() + "x") }))
	case reflect.Bool:
		out = append(out, at("flipped", func(x reflect.Value) { x.SetBool(!x.Bool()) }))
	case reflect.Int32, reflect.Int64:
		out = append(out, at("incremented", func(x reflect.Value) { x.SetInt(x.Int() + 1) }))
	case reflect.Map:
		out = append(out,
			at("nil", func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) }),
			at("empty", func(x reflect.Value) { x.Set(reflect.MakeMap(x.Type())) }),
			at("value changed", func(x reflect.Value) {
				k := reflect.ValueOf("a").Convert(x.Type().Key())
				x.SetMapIndex(k, reflect.ValueOf(x.MapIndex(k).String()+"x").Convert(x.Type().Elem()))
			}),
			at("key changed", func(x reflect.Value) {
				k := reflect.ValueOf("a").Convert(x.Type().Key())
				val := x.MapIndex(k)
				x.SetMapIndex(k, reflect.Value{})
				x.SetMapIndex(reflect.ValueOf("c").Convert(x.Type().Key()), val)
			}),
		)
	case reflect.Pointer:
		out = append(out, at("nil", func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) }))
		out = append(out, mutations(v.Elem(), path, append(steps, -1))...)
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, mutations(v.Field(i), path+"."+v.Type().Field(i).Name, append(steps, i))...)
		}
	case reflect.Slice:
		out = append(out,
			at("nil", func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) }),
			at("empty", func(x reflect.Value) { x.Set(reflect.MakeSlice(x.Type(), 0, 0)) }),
			at("shorter", func(x reflect.Value) { x.Set(x.Slice(0, 1)) }),
			at("swapped", func(x reflect.Value) {
				a, b := reflect.New(x.Type().Elem()).Elem(), reflect.New(x.Type().Elem()).Elem()
				a.Set(x.Index(0))
				b.Set(x.Index(1))
				x.Index(0).Set(b)
				x.Index(1).Set(a)
			}),
		)
		for i := range v.Len() {
			out = append(out, mutations(v.Index(i), fmt.Sprintf("%s[%d]", path, i), append(steps, 1000+i))...)
		}
	default:
		panic("mutations: unhandled kind " + v.Kind().String() + " at " + path)
	}
	return out
}

// apply makes a deep copy of v (through JSON, which keeps nil apart from
// empty) and changes it at m's path.
func (m mutation) apply(t *testing.T, v *View) *View {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var c View
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	x := reflect.ValueOf(&c).Elem()
	for _, s := range m.steps {
		switch {
		case s == -1:
			x = x.Elem()
		case s >= 1000:
			x = x.Index(s - 1000)
		default:
			x = x.Field(s)
		}
	}
	m.change(x)
	return &c
}

// Whatever changes a view's value changes its key: a decision cached for
// one view is never given to a view with another value. Every field of the
// view, down to the containers' security contexts, is changed in turn.
func TestAppendKeyTellsEveryValueApart(t *testing.T) {
	full := fullView(t)
	key, value := full.AppendKey(nil, nil), full.Value()
	if got := (&View{}).AppendKey(nil, nil); bytes.Equal(got, key) {
		t.Fatal("the empty view and the full one have the same key")
	}
	ms := mutations(reflect.ValueOf(full).Elem(), "view", nil)
	if len(ms) < 200 {
		t.Fatalf("only %d mutations: the walk missed fields", len(ms))
	}
	changed := 0
	for _, m := range ms {
		v := m.apply(t, full)
		if v.Value().Compare(value) == 0 {
			continue
		}
		changed++
		if bytes.Equal(v.AppendKey(nil, nil), key) {
			t.Errorf("%s: the value changed and the key did not", m.path)
		}
	}
	if changed < len(ms)/2 {
		t.Errorf("only %d of %d mutations changed the value", changed, len(ms))
	}
}

// AppendKey with read keys only what read names: a change elsewhere keeps
// the key, a change of a read key changes it.
func TestAppendKeyOfReadKeys(t *testing.T) {
	v := fullView(t)
	onlyKind := func(k string) bool { return k == "kind" || k == "gpu" }
	key := v.AppendKey(nil, onlyKind)
	w := *v
	w.Name, w.Labels = "other", nil
	if !bytes.Equal(w.AppendKey(nil, onlyKind), key) {
		t.Error("a change of keys not read changed the key")
	}
	w.GPU.Count++
	if bytes.Equal(w.AppendKey(nil, onlyKind), key) {
		t.Error("a change of gpu.count did not change the key")
	}
}

func BenchmarkAppendKey(b *testing.B) {
	v := Build(vllmDeployment(b))
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = v.AppendKey(buf[:0], nil)
	}
}
