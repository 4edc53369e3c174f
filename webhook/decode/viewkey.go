package decode

import (
	"bytes"
	"encoding/binary"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// AppendViewKey appends to dst an encoding of every field of raw that the
// view decoders (Views) read, found in one pass over the bytes without
// decoding them: each field the view types name, its value's bytes as the
// request holds them, in the order they come. Two objects of one kind that
// append the same bytes, and hold the same name, decode to the same view
// pieces: a field the encoding leaves out is one Views skips, and Views is a
// function of the fields it reads. The object's own metadata.name is
// returned apart (name, the raw JSON value) so that the caller can key
// without it when no policy reads it.
//
// allAnnotations keeps every annotation as Views(raw, true) does; without
// it only the modelgate.io/ ones (and any key with an escape, which this
// scan does not undo) are encoded.
//
// ok is false when the object cannot be keyed this way, and the caller
// then decodes it as usual: a kind Views does not decode, a value of
// another JSON type than the view types hold where an object or array
// is expected, a name given twice, a skipped annotation that is not a string,
// or a Pod (or pod template) that names resource claims, whose view reads
// the claims the cluster holds (policies/workload.ClaimResolver) as well as
// the object.
func AppendViewKey(gvk metav1.GroupVersionKind, raw []byte, allAnnotations bool, dst []byte) (key, name []byte, ok bool) {
	root, known := viewKeyRoots[gvk]
	if !known {
		return dst, nil, false
	}
	s := keyScan{raw: raw, out: dst, all: allAnnotations}
	i, ok := s.value(root, s.ws(0))
	if !ok || s.ws(i) != len(raw) {
		return dst, nil, false
	}
	return s.out, s.name, true
}

// keyNode is how the scan treats a value: an object whose named fields it
// follows (the others skipped), an array of such, or a leaf whose bytes it
// takes whole.
type keyNode struct {
	kind   keyNodeKind
	fields map[string]*keyNode
	elem   *keyNode
}

type keyNodeKind uint8

const (
	leafNode keyNodeKind = iota
	objectNode
	arrayNode
	// annotationsNode is a metadata.annotations (annotationsView).
	annotationsNode
	// nameNode is the object's own metadata.name.
	nameNode
	// emptyNode must be null or an empty array: spec.resourceClaims.
	emptyNode
)

var leaf = &keyNode{kind: leafNode}

func object(fields map[string]*keyNode) *keyNode { return &keyNode{kind: objectNode, fields: fields} }

// The trees below follow viewtypes.go field by field;
// TestViewKeyFollowsTheViewTypes holds them to it.
var (
	containerKey = object(map[string]*keyNode{
		"name": leaf, "image": leaf, "command": leaf, "args": leaf, "ports": leaf, "resources": leaf,
		"securityContext": leaf, "restartPolicy": leaf, "readinessProbe": leaf, "livenessProbe": leaf, "startupProbe": leaf,
	})
	containersKey = &keyNode{kind: arrayNode, elem: containerKey}
	podSpecKey    = object(map[string]*keyNode{
		"containers": containersKey, "initContainers": containersKey, "ephemeralContainers": containersKey,
		"hostNetwork": leaf, "hostPID": leaf, "hostIPC": leaf, "affinity": leaf,
		"resourceClaims": {kind: emptyNode},
	})
	// metaKey is a template's metadata; objectMetaKey the object's own,
	// whose name is returned apart.
	metaKey       = metadataKey(leaf)
	objectMetaKey = metadataKey(&keyNode{kind: nameNode})
	templateKey   = object(map[string]*keyNode{"metadata": metaKey, "spec": podSpecKey})
	templatedKey  = object(map[string]*keyNode{
		"metadata": objectMetaKey,
		"spec":     object(map[string]*keyNode{"template": templateKey}),
	})
	viewKeyRoots = map[metav1.GroupVersionKind]*keyNode{
		{Group: "", Version: "v1", Kind: "Pod"}:             object(map[string]*keyNode{"metadata": objectMetaKey, "spec": podSpecKey}),
		{Group: "apps", Version: "v1", Kind: "Deployment"}:  templatedKey,
		{Group: "apps", Version: "v1", Kind: "StatefulSet"}: templatedKey,
		{Group: "batch", Version: "v1", Kind: "Job"}:        templatedKey,
		{Group: "batch", Version: "v1", Kind: "CronJob"}: object(map[string]*keyNode{
			"metadata": objectMetaKey,
			"spec": object(map[string]*keyNode{"jobTemplate": object(map[string]*keyNode{
				"metadata": metaKey,
				"spec":     object(map[string]*keyNode{"template": templateKey}),
			})}),
		}),
	}
)

func metadataKey(name *keyNode) *keyNode {
	return object(map[string]*keyNode{
		"name": name, "generateName": leaf, "namespace": leaf, "deletionTimestamp": leaf, "labels": leaf,
		"annotations": {kind: annotationsNode}, "ownerReferences": leaf,
	})
}

// keyScan is one scan: the input, the encoding so far, and the name.
type keyScan struct {
	raw  []byte
	out  []byte
	name []byte
	all  bool
}

// The encoding: a field is 'k' and its name, length-prefixed, then its
// value; a leaf is 'v' and its bytes, length-prefixed; an object is '{'
// and its fields then '}'; an array '[' and its elements then ']'; null
// 'n'. Every part is either a fixed byte or length-prefixed, so no two
// different sequences of fields and values encode alike.
func (s *keyScan) bytes(tag byte, b []byte) {
	s.out = append(s.out, tag)
	s.out = binary.AppendUvarint(s.out, uint64(len(b)))
	s.out = append(s.out, b...)
}

// value encodes the value at i as n says and returns the index after it.
func (s *keyScan) value(n *keyNode, i int) (int, bool) {
	if i >= len(s.raw) {
		return i, false
	}
	if n.kind != leafNode && n.kind != nameNode && s.raw[i] == 'n' {
		end, ok := s.skip(i)
		if ok {
			s.out = append(s.out, 'n')
		}
		return end, ok
	}
	switch n.kind {
	case leafNode:
		end, ok := s.skip(i)
		if ok {
			s.bytes('v', s.raw[i:end])
		}
		return end, ok
	case nameNode:
		if s.name != nil {
			return i, false
		}
		end, ok := s.skip(i)
		s.name = s.raw[i:end:end]
		return end, ok
	case emptyNode:
		end, ok := s.skip(i)
		if !ok || !bytes.Equal(bytes.Join(bytes.Fields(s.raw[i:end]), nil), []byte("[]")) {
			return end, false
		}
		s.out = append(s.out, '[', ']')
		return end, true
	case arrayNode:
		return s.array(n.elem, i)
	case annotationsNode:
		return s.annotations(i)
	default:
		return s.object(n.fields, i)
	}
}

// object encodes the fields of the object at i that fields names.
func (s *keyScan) object(fields map[string]*keyNode, i int) (int, bool) {
	return s.members(i, func(k []byte, i int) (int, bool) {
		if child, named := fields[string(k)]; named {
			s.bytes('k', k)
			return s.value(child, i)
		}
		if bytes.IndexByte(k, '\\') >= 0 {
			// A name with an escape may decode to a field's name: not
			// keyed here.
			return i, false
		}
		return s.skip(i)
	})
}

// annotations encodes the annotations the view keeps (annotationsView):
// every one with all, else those whose name begins with modelgate.io/, or
// holds an escape this scan does not undo. A skipped one must be a
// string, as the view decoder requires.
func (s *keyScan) annotations(i int) (int, bool) {
	return s.members(i, func(k []byte, i int) (int, bool) {
		if s.all || bytes.HasPrefix(k, []byte(annotations.Prefix)) || bytes.IndexByte(k, '\\') >= 0 {
			s.bytes('k', k)
			end, ok := s.skip(i)
			if ok {
				s.bytes('v', s.raw[i:end])
			}
			return end, ok
		}
		if s.raw[i] != '"' && s.raw[i] != 'n' {
			return i, false
		}
		return s.skip(i)
	})
}

// members encodes the object at i between '{' and '}', each member by
// member, which is given the member's name and the index of its value and
// returns the index after the value.
func (s *keyScan) members(i int, member func(k []byte, i int) (int, bool)) (int, bool) {
	return s.sequence(i, '{', '}', func(i int) (int, bool) {
		k, next, ok := s.key(i)
		if !ok {
			return next, false
		}
		return member(k, next)
	})
}

// array encodes the elements of the array at i as elem says.
func (s *keyScan) array(elem *keyNode, i int) (int, bool) {
	return s.sequence(i, '[', ']', func(i int) (int, bool) { return s.value(elem, i) })
}

// sequence encodes the object or array at i, between open and closing,
// each item by item, which returns the index after it.
func (s *keyScan) sequence(i int, open, closing byte, item func(i int) (int, bool)) (int, bool) {
	if s.raw[i] != open {
		return i, false
	}
	s.out = append(s.out, open)
	i = s.ws(i + 1)
	if i < len(s.raw) && s.raw[i] == closing {
		s.out = append(s.out, closing)
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = item(i); !ok {
			return i, false
		}
		if i, ok = s.next(i, closing); !ok || s.raw[i-1] == closing {
			if ok {
				s.out = append(s.out, closing)
			}
			return i, ok
		}
	}
}

// key reads an object's field name at i and the colon after it: the name
// as written between its quotes, and the index of the value.
func (s *keyScan) key(i int) ([]byte, int, bool) {
	if i >= len(s.raw) || s.raw[i] != '"' {
		return nil, i, false
	}
	end, ok := s.str(i)
	if !ok {
		return nil, end, false
	}
	k := s.raw[i+1 : end-1]
	j := s.ws(end)
	if j >= len(s.raw) || s.raw[j] != ':' {
		return nil, j, false
	}
	return k, s.ws(j + 1), true
}

// next steps over the whitespace and the comma or the closing byte after a
// member, returning the index after it; raw[i-1] tells which it was.
func (s *keyScan) next(i int, closing byte) (int, bool) {
	i = s.ws(i)
	if i >= len(s.raw) {
		return i, false
	}
	switch s.raw[i] {
	case ',':
		return s.ws(i + 1), true
	case closing:
		return i + 1, true
	}
	return i, false
}

func (s *keyScan) ws(i int) int {
	for i < len(s.raw) {
		switch s.raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// str returns the index after the string that starts at i. Each byte is
// looked at a bounded number of times, however many escapes the string
// holds: the next quote is searched for again only once an escape has
// taken the one found.
func (s *keyScan) str(i int) (int, bool) {
	raw := s.raw
	j := i + 1
	for {
		q := bytes.IndexByte(raw[j:], '"')
		if q < 0 {
			return len(raw), false
		}
		q += j
		for {
			e := bytes.IndexByte(raw[j:q], '\\')
			if e < 0 {
				return q + 1, true
			}
			j += e + 2 // the byte after a backslash is never the end
			if j > q {
				break // the quote at q was escaped
			}
		}
	}
}

// skip returns the index after the value that starts at i. The request's
// envelope was checked as JSON before (reviewhttp.go), so a value is
// well formed; skip only finds its end, and reports false on anything it
// does not expect.
func (s *keyScan) skip(i int) (int, bool) {
	if i >= len(s.raw) {
		return i, false
	}
	switch s.raw[i] {
	case '"':
		return s.str(i)
	case '{', '[':
		raw, depth := s.raw, 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				end, ok := s.str(j)
				if !ok {
					return end, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return len(raw), false
	default:
		// A number, true, false or null runs to the next delimiter.
		j := i
		for j < len(s.raw) {
			switch s.raw[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}
