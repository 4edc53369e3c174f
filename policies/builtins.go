package policies

import (
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// allowedBuiltins are the builtins an admission policy may call: those whose
// cost is bounded by the size of their input, so that a policy's time and
// memory grow with the object under review and not with a constant the
// author wrote. Everything else in OPA is refused at compile time (with
// the reason in refusedBuiltins when there is one); a builtin a newer OPA
// adds stays refused until it is listed here.
var allowedBuiltins = []string{
	// Operators, comparison, arithmetic and assignment.
	"assign", "eq", "equal", "neq", "lt", "lte", "gt", "gte",
	"plus", "minus", "mul", "div", "rem", "abs", "ceil", "floor", "round",
	"and", "or", "bits.and", "bits.or", "bits.xor", "bits.negate", "bits.lsh", "bits.rsh",
	// What the compiler rewrites `in`, print and template strings into, and
	// what `modelgate test` needs to run tests.
	"internal.member_2", "internal.member_3", "internal.print", "internal.template_string",
	"internal.test_case", "print",
	// Aggregates and collections.
	"count", "sum", "product", "max", "min", "sort", "all", "any",
	"array.concat", "array.slice", "array.reverse", "array.flatten",
	"intersection", "union", "set_diff",
	"object.get", "object.keys", "object.union", "object.union_n", "object.remove",
	"object.filter", "object.subset", "walk",
	// Types.
	"is_number", "is_string", "is_boolean", "is_array", "is_set", "is_object", "is_null",
	"type_name", "to_number", "cast_array", "cast_set", "cast_string", "cast_boolean",
	"cast_null", "cast_object",
	// Strings. sprintf's widths are capped by Go's fmt (10^6).
	"concat", "contains", "startswith", "endswith", "lower", "upper", "split",
	"strings.split_n", "substring", "indexof", "indexof_n", "trim", "trim_left",
	"trim_right", "trim_prefix", "trim_suffix", "trim_space", "sprintf", "format_int",
	"strings.any_prefix_match", "strings.any_suffix_match", "strings.count",
	"strings.reverse",
	// Patterns: Go's regexp and OPA's glob run in time linear in their input.
	"re_match", "regex.match", "regex.is_valid", "regex.split", "regex.find_n",
	"regex.find_all_string_submatch_n", "regex.globs_match", "regex.template_match",
	"glob.match", "glob.quote_meta",
	// Units, versions, encodings, parsing of what the object carries.
	"units.parse", "units.parse_bytes", "semver.compare", "semver.is_valid",
	"json.marshal", "json.marshal_with_options", "json.unmarshal", "json.is_valid",
	"json.filter", "json.remove", "json.patch",
	"yaml.marshal", "yaml.unmarshal", "yaml.is_valid",
	"base64.encode", "base64.decode", "base64.is_valid", "base64url.encode",
	"base64url.encode_no_pad", "base64url.decode", "hex.encode", "hex.decode",
	"urlquery.encode", "urlquery.decode", "urlquery.encode_object", "urlquery.decode_object",
	"uri.parse", "uri.is_valid", "uuid.parse",
	"net.cidr_contains", "net.cidr_intersects", "net.cidr_is_valid", "net.cidr_overlap",
	"net.cidr_contains_matches", "net.cidr_merge",
	"crypto.sha256", "crypto.sha1", "crypto.md5",
	// Dates, from values in the object (not the clock: time.now_ns is out).
	"time.parse_ns", "time.parse_rfc3339_ns", "time.parse_duration_ns", "time.date",
	"time.clock", "time.weekday", "time.add_date", "time.diff", "time.format",
	"graph.reachable",
	"rego.metadata.chain", "rego.metadata.rule",
}

// refusedBuiltins says why notable builtins are refused; the compile error
// quotes it.
var refusedBuiltins = map[string]string{
	"numbers.range":           "it allocates an array as long as the range, whatever the input",
	"numbers.range_step":      "it allocates an array as long as the range, whatever the input",
	"net.cidr_expand":         "it allocates one string per address of the block (16 million for a /8)",
	"replace":                 "its output can be its input times the replacement's length",
	"strings.replace_n":       "its output can be its input times the replacements' length",
	"regex.replace":           "its output can be its input times the replacement's length",
	"strings.render_template": "templates can loop without bound",
	"graph.reachable_paths":   "the number of paths can grow exponentially",
	"http.send":               "admission decides from the review alone: no network calls",
	"net.lookup_ip_addr":      "admission decides from the review alone: no network calls",
	"providers.aws.sign_req":  "admission decides from the review alone: no network calls",
	"opa.runtime":             "it exposes the server's environment",
	"time.now_ns":             "a decision must not depend on the clock: offline tests must give the server's answer",
	"rand.intn":               "a decision must be deterministic",
	"uuid.rfc4122":            "a decision must be deterministic",
	"trace":                   "traces are not collected at admission",
}

// refusedPrefixes say why whole families are refused.
var refusedPrefixes = map[string]string{
	"io.jwt.":            "token signing and verification are costly and need keys a policy must not hold",
	"crypto.x509.":       "certificate parsing and verification are costly and not about workloads",
	"crypto.hmac.":       "keys do not belong in policies",
	"crypto.parse":       "keys do not belong in policies",
	"graphql.":           "schema parsing is costly and not about workloads",
	"json.match_schema":  "schema compilation is costly: compare fields instead",
	"json.verify_schema": "schema compilation is costly: compare fields instead",
	"rego.parse_module":  "policies do not compile policies",
}

// refusal is why name is not available, "" for a builtin OPA does not have.
func refusal(name string) string {
	if r, ok := refusedBuiltins[name]; ok {
		return r
	}
	for p, r := range refusedPrefixes {
		if strings.HasPrefix(name, p) {
			return r
		}
	}
	if slices.ContainsFunc(ast.CapabilitiesForThisVersion().Builtins, func(b *ast.Builtin) bool { return b.Name == name }) {
		return "it is not on modelgate's list of builtins for admission policies"
	}
	return ""
}

// capabilities are this OPA version's, restricted to allowedBuiltins and
// without fetching remote schemas.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return !slices.Contains(allowedBuiltins, b.Name)
	})
	c.Builtins = append(c.Builtins, readBuiltinDecl)
	c.AllowNet = []string{}
	return c
})
