package tools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Schemas are derived from the Go types of a tool's arguments and result,
// so the schema, the validation and the documentation cannot disagree.
// Struct tags say what JSON Schema cannot learn from the type:
//
//	json:"name,omitempty"  the property name; omitempty makes a result field optional
//	desc:"..."             the description
//	required:"true"        an argument that must be given
//	min:"1" max:"100"      a number's range, a string's length in characters, a list's length
//	default:"20"           the default, for the documentation
//	enum:"a,b,c"           the allowed values of a string
//
// The schemas stay strict-clean for validators: one "type" per property
// (never ["null", ...] type arrays: an optional value is left out instead
// of sent as null), every object's properties listed.

// schema is one JSON Schema node.
type schema struct {
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	Properties           map[string]*schema `json:"properties,omitzero"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	Default              any                `json:"default,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	MinItems             *int               `json:"minItems,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
	AnyOf                []*schema          `json:"anyOf,omitempty"`

	// order keeps the properties in declaration order for the docs.
	order []string
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// anyJSON is the schema of any JSON value: one branch per type, which
// strict validators (the MCP Inspector's --strict) accept where {} is
// "untyped".
func anyJSON() *schema {
	return &schema{AnyOf: []*schema{{Type: "string"}, {Type: "number"}, {Type: "boolean"}, {Type: "object"}, {Type: "array"}}}
}

// schemaOf derives the schema of t. input marks argument types: their
// objects refuse unknown properties and their required list comes from
// the required tag; a result's required list is every field without
// omitempty.
func schemaOf(t reflect.Type, input bool) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawType {
		return anyJSON()
	}
	if t == timeType {
		return &schema{Type: "string", Format: "date-time"}
	}
	switch t.Kind() {
	case reflect.String:
		return &schema{Type: "string"}
	case reflect.Bool:
		return &schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &schema{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}
	case reflect.Slice, reflect.Array:
		return &schema{Type: "array", Items: schemaOf(t.Elem(), input)}
	case reflect.Map:
		return &schema{Type: "object"}
	case reflect.Interface:
		return anyJSON()
	case reflect.Struct:
		s := &schema{Type: "object", Properties: map[string]*schema{}}
		if input {
			no := false
			s.AdditionalProperties = &no
		}
		for _, f := range fieldsOf(t) {
			p := schemaOf(f.typ, input)
			f.constrain(p)
			s.Properties[f.name] = p
			s.order = append(s.order, f.name)
			if input && f.required || !input && !f.omitempty {
				s.Required = append(s.Required, f.name)
			}
		}
		return s
	}
	panic(fmt.Sprintf("tools: no JSON schema for Go type %s", t))
}

// field is one JSON property of a struct, with its tags.
type field struct {
	name      string
	index     []int
	typ       reflect.Type
	omitempty bool
	required  bool
	desc      string
	min, max  *float64
	def       string
	enum      []string
}

// fieldCache holds fieldsOf's answer per type: arguments are decoded on
// every call, and a type's fields never change.
var fieldCache sync.Map // reflect.Type -> []field

// fieldsOf lists t's JSON properties as encoding/json sees them:
// embedded structs are flattened, fields tagged "-" and unexported ones
// skipped.
func fieldsOf(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	f := structFields(t)
	fieldCache.Store(t, f)
	return f
}

func structFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			for _, f := range structFields(et) {
				f.index = append([]int{i}, f.index...)
				out = append(out, f)
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := field{
			name: name, index: []int{i}, typ: sf.Type,
			omitempty: strings.Contains(","+opts+",", ",omitempty,"),
			required:  sf.Tag.Get("required") == "true",
			desc:      sf.Tag.Get("desc"),
			def:       sf.Tag.Get("default"),
			min:       tagNumber(sf, "min"),
			max:       tagNumber(sf, "max"),
		}
		if e := sf.Tag.Get("enum"); e != "" {
			f.enum = strings.Split(e, ",")
		}
		out = append(out, f)
	}
	return out
}

func tagNumber(sf reflect.StructField, key string) *float64 {
	v, ok := sf.Tag.Lookup(key)
	if !ok {
		return nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		panic(fmt.Sprintf("tools: field %s: tag %s=%q is not a number", sf.Name, key, v))
	}
	return &n
}

// constrain writes the field's tags into its schema.
func (f field) constrain(p *schema) {
	p.Description = f.desc
	p.Enum = f.enum
	if f.def != "" {
		p.Default = typedDefault(p.Type, f.def)
	}
	switch p.Type {
	case "integer", "number":
		p.Minimum, p.Maximum = f.min, f.max
	case "string":
		p.MinLength, p.MaxLength = intPtr(f.min), intPtr(f.max)
	case "array":
		p.MinItems, p.MaxItems = intPtr(f.min), intPtr(f.max)
	}
}

func intPtr(f *float64) *int {
	if f == nil {
		return nil
	}
	n := int(*f)
	return &n
}

func typedDefault(typ, v string) any {
	switch typ {
	case "integer", "number":
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
	case "boolean":
		return v == "true"
	}
	return v
}

// raw encodes the schema for mcp-go's RawInputSchema/RawOutputSchema.
func (s *schema) raw() json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic("tools: schema: " + err.Error())
	}
	return b
}

// decodeSchema reads back a schema made by raw.
func decodeSchema(b json.RawMessage) (*schema, error) {
	var s schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
