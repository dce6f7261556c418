package apiserver_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// schemaGen draws JSON values from OpenAPI schemas: values a schema admits, and values that
// break exactly one of its keywords. It knows nothing of the API; hints (values of the fixture,
// keyed by property or parameter name) only make an admitted value more likely to reach past a
// 404 to the rules behind it.
type schemaGen struct {
	rnd   *rand.Rand
	hints map[string][]any
}

// Instants are drawn from here to an hour before the run: old enough for every list, never
// in the future, where "until defaults to now" rules would bite.
var genEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// valid draws a value the schema admits. name is the property or parameter it is for.
func (g *schemaGen) valid(name string, ref *openapi3.SchemaRef) any {
	s := ref.Value
	if hinted, ok := g.hinted(name, s); ok {
		return hinted
	}
	switch {
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[g.rnd.IntN(len(s.Enum))]
	case len(s.OneOf) > 0:
		return g.validBranch(name, s, s.OneOf, true)
	case len(s.AnyOf) > 0:
		return g.validBranch(name, s, s.AnyOf, false)
	}
	switch g.typeOf(s) {
	case openapi3.TypeInteger:
		lo, hi := intBounds(s)
		if top, open := openMax(s); open && g.rnd.IntN(5) == 0 {
			// An integer without a maximum of its own is any integer from the minimum to the
			// documents' bound of every integer: one in five is far past what a page or an
			// order holds.
			return lo + g.rnd.Int64N(top-lo)
		}
		return lo + g.rnd.Int64N(hi-lo+1)
	case openapi3.TypeNumber:
		lo, hi := intBounds(s)
		return float64(lo+g.rnd.Int64N(hi-lo+1)) / 4
	case openapi3.TypeBoolean:
		return g.rnd.IntN(2) == 0
	case openapi3.TypeArray:
		n := int(s.MinItems) + g.rnd.IntN(3)
		if s.MaxItems != nil {
			n = min(n, int(*s.MaxItems))
		}
		out := make([]any, n)
		for i := range out {
			out[i] = g.valid(name, s.Items)
		}
		return out
	case openapi3.TypeObject:
		return g.validObject(s)
	default:
		return g.vary(s, g.validString(s))
	}
}

// maxExactInteger is the documents' bound of every integer without a tighter one: I-JSON's
// largest exact integer (RFC 7493), 2^53 - 1.
const maxExactInteger = 1<<53 - 1

// openMax is the largest integer a schema admits when its only maximum is the documents'
// bound of every integer, or it has none: such a bound is no limit a page or an order meets.
func openMax(s *openapi3.Schema) (int64, bool) {
	if s.Max == nil {
		return math.MaxInt64, true
	}
	return int64(*s.Max), *s.Max >= maxExactInteger
}

// isOpenMin says a schema's minimum, if any, is the documents' bound of every integer.
func isOpenMin(s *openapi3.Schema) bool { return s.Min == nil || *s.Min <= -maxExactInteger }

// spacings are what may surround text: the whitespace of ASCII, Latin-1 and beyond that servers
// could trim, and none of which a value of a pattern, format or enumeration holds.
var spacings = []string{" ", "\t", "\u00a0", "\u3000", "\v"}

// textVariants are values a partner may send for v that differ only by what servers could
// be lenient about: whitespace around it, and its letter case.
func (g *schemaGen) textVariants(v string) (spacing, casing []string) {
	sp := spacings[g.rnd.IntN(len(spacings))]
	spacing = []string{sp + v, v + sp, sp + v + sp}
	for _, c := range []string{strings.ToUpper(v), strings.ToLower(v), swapCase(v)} {
		if c != v {
			casing = append(casing, c)
		}
	}
	return spacing, casing
}

func swapCase(v string) string {
	return strings.Map(func(r rune) rune {
		if u := unicode.ToUpper(r); u != r {
			return u
		}
		return unicode.ToLower(r)
	}, v)
}

// vary returns, one time in six, a spacing or case variant of v that the schema still admits,
// so that the server is held to take every value the document admits, not only the canonical
// ones; otherwise v.
func (g *schemaGen) vary(s *openapi3.Schema, v string) string {
	if g.rnd.IntN(6) != 0 {
		return v
	}
	spacing, casing := g.textVariants(v)
	candidates := append(spacing, casing...)
	c := candidates[g.rnd.IntN(len(candidates))]
	if s.VisitJSON(c) == nil {
		return c
	}
	return v
}

// validBranch draws from one branch of a oneOf or anyOf, merged with the keywords beside it; for
// oneOf, a value that other branches admit too is drawn again.
func (g *schemaGen) validBranch(name string, s *openapi3.Schema, branches openapi3.SchemaRefs, one bool) any {
	for range 50 {
		merged := mergeSchemas(s, branches[g.rnd.IntN(len(branches))].Value)
		v := g.valid(name, openapi3.NewSchemaRef("", merged))
		if !one || admittedBy(branches, v) == 1 {
			return v
		}
	}
	panic(fmt.Sprintf("no value of %s fits exactly one branch of its oneOf", name))
}

func admittedBy(branches openapi3.SchemaRefs, v any) int {
	n := 0
	for _, b := range branches {
		if b.Value.VisitJSON(v) == nil {
			n++
		}
	}
	return n
}

// mergeSchemas is s without its oneOf/anyOf, narrowed by one branch: a branch that is a whole
// schema of its own (as a parameter's date-time or date) stands alone; one that adds
// requirements and keywords of properties (as an order line's productCode or productId) adds
// them to s.
func mergeSchemas(s, branch *openapi3.Schema) *openapi3.Schema {
	if s.Type == nil && len(s.Properties) == 0 {
		alone := *branch
		return &alone
	}
	merged := *s
	merged.OneOf, merged.AnyOf = nil, nil
	merged.Required = append(slices.Clone(s.Required), branch.Required...)
	if branch.Type != nil {
		merged.Type = branch.Type
	}
	if branch.Format != "" {
		merged.Format = branch.Format
	}
	if branch.Pattern != "" {
		merged.Pattern = branch.Pattern
	}
	if len(branch.Properties) > 0 {
		merged.Properties = openapi3.Schemas{}
		for k, v := range s.Properties {
			merged.Properties[k] = v
		}
		for k, v := range branch.Properties {
			if base := s.Properties[k]; base != nil {
				v = openapi3.NewSchemaRef("", mergeSchemas(base.Value, v.Value))
			}
			merged.Properties[k] = v
		}
	}
	return &merged
}

// hinted picks a fixture value for name, half of the time, when it is one the schema admits.
func (g *schemaGen) hinted(name string, s *openapi3.Schema) (any, bool) {
	pool := g.hints[name]
	if len(pool) == 0 || g.rnd.IntN(2) == 0 {
		return nil, false
	}
	v := pool[g.rnd.IntN(len(pool))]
	if text, ok := v.(string); ok {
		v = g.vary(s, text)
	}
	return v, s.VisitJSON(v) == nil
}

func (g *schemaGen) typeOf(s *openapi3.Schema) string {
	types := slices.DeleteFunc(s.Type.Slice(), func(t string) bool { return t == openapi3.TypeNull })
	if len(types) == 0 {
		if len(s.Properties) > 0 {
			return openapi3.TypeObject
		}
		return openapi3.TypeString
	}
	return types[g.rnd.IntN(len(types))]
}

// intBounds are a numeric schema's bounds; an open side stays within a hundred of the other, so
// that amounts and quantities remain affordable.
func intBounds(s *openapi3.Schema) (lo, hi int64) {
	lo, hi = 0, 100
	if !isOpenMin(s) {
		lo = int64(math.Ceil(*s.Min))
		hi = lo + 100
	}
	if _, open := openMax(s); !open {
		hi = int64(math.Floor(*s.Max))
		if isOpenMin(s) {
			lo = hi - 100
		}
	}
	return lo, hi
}

func (g *schemaGen) validObject(s *openapi3.Schema) map[string]any {
	out := map[string]any{}
	for _, name := range sortedKeys(s.Properties) {
		if slices.Contains(s.Required, name) || g.rnd.IntN(2) == 0 {
			out[name] = g.valid(name, s.Properties[name])
		}
	}
	if extra := s.AdditionalProperties.Schema; extra != nil && len(s.Properties) == 0 {
		n := int(s.MinProps) + g.rnd.IntN(4)
		if s.MaxProps != nil {
			n = min(n, int(*s.MaxProps))
		}
		for range n {
			key := "k"
			if s.PropertyNames != nil {
				key = g.validString(s.PropertyNames.Value)
			}
			out[key] = g.valid(key, extra)
		}
	}
	return out
}

// textAlphabet is what free text is drawn from: letters of three scripts, digits, punctuation
// and space, as partners' references and notes hold them.
var textAlphabet = []rune("abcXYZ019 -_.:/,;@#äßéЖ中🙂'\"\\")

func (g *schemaGen) validString(s *openapi3.Schema) string {
	switch s.Format {
	case "date-time":
		return g.dateTime(g.instant())
	case "date":
		return g.instant().Format(time.DateOnly)
	}
	if s.Pattern != "" && !strings.HasPrefix(s.Pattern, "^") {
		// An unanchored pattern constrains free text: draw text until one fits.
		for range 100 {
			if v := g.freeText(s); s.VisitJSON(v) == nil {
				return v
			}
		}
	}
	if s.Pattern != "" {
		for range 100 {
			v := g.fromPattern(s.Pattern)
			if s.VisitJSON(v) == nil {
				return v
			}
		}
		panic(fmt.Sprintf("no string of pattern %q fits its schema", s.Pattern))
	}
	return g.freeText(s)
}

// freeText draws text within the schema's lengths; one in ten is blank, which servers that trim
// may read as empty, in any of the spacings.
func (g *schemaGen) freeText(s *openapi3.Schema) string {
	lo, hi := int(s.MinLength), int(s.MinLength)+12
	if s.MaxLength != nil {
		hi = min(hi, int(*s.MaxLength))
	}
	n := lo + g.rnd.IntN(hi-lo+1)
	if g.rnd.IntN(10) == 0 {
		return g.blank(n)
	}
	return g.text(n)
}

// blank is n characters of whitespace, of the kinds in spacings.
func (g *schemaGen) blank(n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(spacings[g.rnd.IntN(len(spacings))])
	}
	return b.String()
}

func (g *schemaGen) text(n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(textAlphabet[g.rnd.IntN(len(textAlphabet))])
	}
	return b.String()
}

func (g *schemaGen) instant() time.Time {
	span := time.Since(genEpoch) - time.Hour
	return genEpoch.Add(time.Duration(g.rnd.Int64N(int64(span)))).Truncate(time.Second)
}

// dateTime writes t as RFC 3339 allows: UTC or an offset, with or without fractional seconds.
func (g *schemaGen) dateTime(t time.Time) string {
	layout := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00"}[g.rnd.IntN(3)]
	if g.rnd.IntN(2) == 0 {
		t = t.In(time.FixedZone("", (g.rnd.IntN(27)-12)*1800))
	}
	return t.Format(layout)
}

// fromPattern draws a string that matches an anchored regular expression.
func (g *schemaGen) fromPattern(pattern string) string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		panic(fmt.Sprintf("pattern %q: %v", pattern, err))
	}
	var b strings.Builder
	g.writeRegexp(&b, re.Simplify())
	return b.String()
}

func (g *schemaGen) writeRegexp(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		// Ranges are pairs of bounds; a class such as [^\x00] spans all of Unicode, so its
		// last range is cut to the printable plane.
		i := g.rnd.IntN(len(re.Rune) / 2)
		lo, hi := re.Rune[2*i], min(re.Rune[2*i+1], 0x2FFF)
		if lo > hi {
			lo, hi = re.Rune[0], min(re.Rune[1], 0x7E)
		}
		b.WriteRune(lo + rune(g.rnd.IntN(int(hi-lo)+1)))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteRune(textAlphabet[g.rnd.IntN(len(textAlphabet))])
	case syntax.OpCapture:
		g.writeRegexp(b, re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			g.writeRegexp(b, sub)
		}
	case syntax.OpAlternate:
		g.writeRegexp(b, re.Sub[g.rnd.IntN(len(re.Sub))])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			lo, hi = 0, 8
		case syntax.OpPlus:
			lo, hi = 1, 8
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		if hi < 0 {
			hi = lo + 8
		}
		for range lo + g.rnd.IntN(hi-lo+1) {
			g.writeRegexp(b, re.Sub[0])
		}
	}
}

// violation is a value that breaks one keyword of a schema, and which.
type violation struct {
	rule  string
	value any
	// bound is the minimum or maximum a value beyond it breaks, which its refusal names.
	bound string
}

// violations lists values that break exactly one keyword of s each: every other keyword of s
// admits them, which is checked on a copy of s without the broken keyword. asText: the value
// travels as text (a parameter), where only strings and numbers are sent.
func (g *schemaGen) violations(name string, ref *openapi3.SchemaRef, asText bool) []violation {
	b := &breaker{g: g, s: ref.Value, valid: g.valid(name, ref)}
	switch typ := g.typeOf(b.s); {
	case len(b.s.Enum) > 0:
		b.add("enum", func(l *openapi3.Schema) { l.Enum = nil }, "x"+fmt.Sprint(b.valid)+"x", g.text(5), "")
		b.variants("enum", func(l *openapi3.Schema) { l.Enum = nil })
	case typ == openapi3.TypeInteger || typ == openapi3.TypeNumber:
		b.numberRules(asText)
	case typ == openapi3.TypeString:
		b.stringRules(asText)
	case asText:
	case typ == openapi3.TypeArray:
		b.arrayRules(name)
	case typ == openapi3.TypeObject:
		b.objectRules()
	}
	return b.out
}

// breaker collects the violations of one schema.
type breaker struct {
	g     *schemaGen
	s     *openapi3.Schema
	valid any
	out   []violation
}

// add keeps the first candidate that s refuses and s without the keyword admits.
func (b *breaker) add(rule string, without func(*openapi3.Schema), candidates ...any) {
	loose := *b.s
	without(&loose)
	for _, c := range candidates {
		if b.s.VisitJSON(c) != nil && loose.VisitJSON(c) == nil {
			b.out = append(b.out, violation{rule: rule, value: c})
			return
		}
	}
}

// addBound adds a value beyond a numeric bound, whose refusal must name the bound.
func (b *breaker) addBound(rule string, without func(*openapi3.Schema), bound float64, value int64) {
	n := len(b.out)
	b.add(rule, without, value)
	if len(b.out) > n {
		b.out[n].bound = strconv.FormatInt(int64(bound), 10)
	}
}

// variants adds the spacing and the case variants of the valid value that break rule, each a
// violation of its own, so that a server lenient about either is found.
func (b *breaker) variants(rule string, without func(*openapi3.Schema)) {
	str, ok := b.valid.(string)
	if !ok {
		return
	}
	spacing, casing := b.g.textVariants(str)
	b.add(rule+" (spacing)", without, toAny(spacing)...)
	b.add(rule+" (case)", without, toAny(casing)...)
}

func toAny(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

func (b *breaker) numberRules(asText bool) {
	s, rnd := b.s, b.g.rnd
	if s.Min != nil {
		b.addBound("minimum", func(l *openapi3.Schema) { l.Min = nil }, *s.Min, int64(*s.Min)-1-rnd.Int64N(1000))
	}
	if s.Max != nil {
		b.addBound("maximum", func(l *openapi3.Schema) { l.Max = nil }, *s.Max, int64(*s.Max)+1+rnd.Int64N(1000))
	}
	if asText {
		// In a query, a value that is not a number breaks the type: one beyond every integer a
		// machine holds, or a number with whitespace around it, too.
		notNumbers := []string{"abc", "1.5", "", "0x10", "1e3", "++1", "99999999999999999999",
			spacings[rnd.IntN(len(spacings))] + fmt.Sprint(b.valid)}
		b.out = append(b.out, violation{rule: "type", value: notNumbers[rnd.IntN(len(notNumbers))]})
	} else {
		b.out = append(b.out, violation{rule: "type", value: fmt.Sprint(b.valid)})
	}
}

func (b *breaker) stringRules(asText bool) {
	s, g := b.s, b.g
	str, _ := b.valid.(string)
	if s.MinLength > 0 {
		b.add("minLength", func(l *openapi3.Schema) { l.MinLength = 0 }, str[:0])
	}
	if s.MaxLength != nil {
		b.add("maxLength", func(l *openapi3.Schema) { l.MaxLength = nil },
			strings.Repeat("a", int(*s.MaxLength)+1+g.rnd.IntN(5)))
	}
	if s.Pattern != "" {
		b.add("pattern", func(l *openapi3.Schema) { l.Pattern = "" },
			str+"!", "!"+str, g.blank(max(len(str), int(s.MinLength))), g.text(len(str)),
			strings.ToUpper(str)+"-", strings.Repeat("9", len(str)+1), str[:len(str)/2])
		b.variants("pattern", func(l *openapi3.Schema) { l.Pattern = "" })
	}
	if s.Format == "date-time" || s.Format == "date" {
		b.add("format", func(l *openapi3.Schema) { l.Format = "" },
			"yesterday", str+"x", strings.Replace(str, "-", "/", 2), "2026-13-01T00:00:00Z", "2026-13-01")
		b.variants("format", func(l *openapi3.Schema) { l.Format = "" })
	}
	if s.MaxLength != nil && str != "" {
		// The length counts the whitespace around a value.
		padded := strings.Repeat(" ", int(*s.MaxLength)+1-utf8.RuneCountInString(str)) + str
		b.add("maxLength (spacing)", func(l *openapi3.Schema) { l.MaxLength = nil }, padded)
	}
	if !asText {
		b.out = append(b.out, violation{rule: "type", value: g.rnd.Int64N(100)})
	}
}

func (b *breaker) arrayRules(name string) {
	s := b.s
	if s.MinItems > 0 {
		b.add("minItems", func(l *openapi3.Schema) { l.MinItems = 0 }, []any{})
	}
	if s.MaxItems != nil {
		long := make([]any, int(*s.MaxItems)+1)
		for i := range long {
			long[i] = b.g.valid(name, s.Items)
		}
		b.add("maxItems", func(l *openapi3.Schema) { l.MaxItems = nil }, long)
	}
	b.out = append(b.out, violation{rule: "type", value: map[string]any{}})
}

func (b *breaker) objectRules() {
	s, extraValues := b.s, b.s.AdditionalProperties.Schema
	if s.MaxProps != nil && extraValues != nil {
		many := map[string]any{}
		for i := range int(*s.MaxProps) + 1 {
			many[fmt.Sprintf("k%d", i)] = b.g.valid("", extraValues)
		}
		b.add("maxProperties", func(l *openapi3.Schema) { l.MaxProps = nil }, many)
	}
	if pn := s.PropertyNames; pn != nil && pn.Value.MaxLength != nil && extraValues != nil {
		b.add("propertyNames", func(l *openapi3.Schema) { l.PropertyNames = nil },
			map[string]any{strings.Repeat("k", int(*pn.Value.MaxLength)+1): b.g.valid("", extraValues)})
	}
	if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
		obj, _ := b.valid.(map[string]any)
		extra := maps(obj)
		extra["unknownField"] = "x"
		b.add("additionalProperties",
			func(l *openapi3.Schema) { l.AdditionalProperties = openapi3.AdditionalProperties{} }, extra)
	}
	b.out = append(b.out, violation{rule: "type", value: []any{}})
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
