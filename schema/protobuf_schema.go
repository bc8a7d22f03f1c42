package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file turns a .proto schema into the decoder's view of one message
// type: a pbPlan per message on a configured path, listing the configured
// fields by number with how to read each (pbKind), whether an absent one
// is its zero value (implicit presence) and, for a field whose configured
// fields lie below, the plan of its message type. The .proto text is
// compiled by github.com/bufbuild/protocompile into descriptors of
// google.golang.org/protobuf; the binary is walked here (protobuf.go) with
// protowire, reading only the configured fields and skipping the others
// by wire type.

// protoFileName is the name the schema's own .proto file is compiled
// under (imports of it by another file are not possible: it is the root).
const protoFileName = "dpstream_input.proto"

// pbKind is how the wire value of a configured field is read.
type pbKind uint8

const (
	pbInt32 pbKind = iota // varint, cast to int32 (the specification's parse rule)
	pbInt64
	pbUint32
	pbUint64
	pbSint32 // zig-zag varint
	pbSint64
	pbBool // varint, non-zero is true
	pbEnum // varint, read as the value's name
	pbFixed32
	pbFixed64
	pbSfixed32
	pbSfixed64
	pbFloat
	pbDouble
	pbString
	pbTimestamp // a google.protobuf.Timestamp message, read as a time
	pbMessage   // a descent: the configured fields lie below
)

// pbTimestampName is the well-known type of a time: seconds and nanos
// since the epoch (google/protobuf/timestamp.proto).
const pbTimestampName = "google.protobuf.Timestamp"

// pbStep is one configured field of a message.
type pbStep struct {
	num  protowire.Number
	wire protowire.Type // the wire type the schema gives the field
	kind pbKind
	// ref is a field index (read the value) or ^node (descend into the
	// message: sub).
	ref int
	sub *pbPlan
	// implicit marks a field with implicit presence (proto3 singular
	// scalars without `optional`): absent on the wire, it is its zero
	// value, as every Protobuf reader sees it.
	implicit bool
	enum     *pbEnumNames // the names of an enum's values
}

// pbEnumNames maps enum value numbers to names: dense for the numbers
// 0 … len(dense)−1 (the usual enum), a map for the others.
type pbEnumNames struct {
	dense  [][]byte
	sparse map[int32][]byte
}

// name returns the name of enum number n, or nil when the enum does not
// declare n (proto3 enums are open: any int32 may occur on the wire).
func (e *pbEnumNames) name(n int32) []byte {
	if n >= 0 && int(n) < len(e.dense) {
		return e.dense[n]
	}
	return e.sparse[n]
}

// pbPlan is a message type bound to a node of the configured paths.
type pbPlan struct {
	steps []pbStep
	// implicit are the indices in steps of the implicit-presence fields
	// (given their zero value when the message lacks them).
	implicit []int
	// byNum[num] is 1 + the index in steps of field number num, or 0,
	// for the numbers below len(byNum) (pbDirectNumbers at most); larger
	// numbers are searched in steps.
	byNum []uint8
}

// pbDirectNumbers bounds the field numbers a pbPlan looks up in a table
// rather than by a search: 256 bytes per message on a configured path,
// and the numbers of most messages' fields are below it.
const pbDirectNumbers = 256

// step returns the configured field numbered num, or nil.
func (p *pbPlan) step(num protowire.Number) *pbStep {
	if uint64(num) < uint64(len(p.byNum)) {
		if i := p.byNum[num]; i > 0 {
			return &p.steps[i-1]
		}
		return nil
	}
	for i := range p.steps {
		if p.steps[i].num == num {
			return &p.steps[i]
		}
	}
	return nil
}

// index fills byNum (steps fit in a uint8: a node has at most one key
// per configured field, and there are at most MaxGroupBy+4 fields).
func (p *pbPlan) index() {
	p.byNum = make([]uint8, pbDirectNumbers)
	for i, st := range p.steps {
		if st.num < pbDirectNumbers {
			p.byNum[st.num] = uint8(i + 1)
		}
	}
}

// compileProto compiles the .proto text (and the files it imports: refs,
// by import name, beside the standard well-known types) and returns the
// descriptor of text's file.
func compileProto(text string, refs map[string]string) (protoreflect.FileDescriptor, error) {
	files := make(map[string]string, len(refs)+1)
	for name, ref := range refs {
		files[name] = ref
	}
	files[protoFileName] = text
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(files),
	})}
	res, err := c.Compile(context.Background(), protoFileName)
	var pe protocompile.PanicError
	switch {
	case errors.As(err, &pe):
		return nil, errors.New("the .proto compiler failed (a bug in it, recovered)")
	case err != nil:
		return nil, err
	}
	return res[0], nil
}

// plainProto compiles the configured schema and binds its configured
// message to d's paths.
func (d *Decoder) plainProto() (*pbPlan, error) {
	if strings.TrimSpace(d.cfg.ProtobufSchema) == "" || d.cfg.ProtobufMessage == "" {
		return nil, errors.New("format protobuf needs protobuf_schema and protobuf_message, or registry.url")
	}
	fd, err := compilePlainProto(d.cfg.ProtobufSchema)
	if err != nil {
		return nil, fmt.Errorf("protobuf_schema: %w", err)
	}
	name := protoreflect.FullName(strings.TrimPrefix(d.cfg.ProtobufMessage, "."))
	md, ok := fd.(linker.File).FindDescriptorByName(name).(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("protobuf_message: the schema defines no message %q", d.cfg.ProtobufMessage)
	}
	plan, err := d.bindProto(md)
	if err != nil {
		return nil, fmt.Errorf("protobuf_schema: %w", err)
	}
	d.protoMD = md
	return plan, nil
}

// bindProto binds message md to node 0 of d's paths. It returns an error
// naming every configured field the message does not contain and every
// one whose type its roles do not accept.
func (d *Decoder) bindProto(md protoreflect.MessageDescriptor) (*pbPlan, error) {
	found := make([]bool, len(d.fields))
	var problems []string
	plan := d.bindMessage(md, 0, found, &problems)
	var missing []string
	for i, ok := range found {
		if !ok {
			missing = append(missing, fmt.Sprintf("%q", d.fields[i].name))
		}
	}
	if len(missing) > 0 {
		problems = append([]string{fmt.Sprintf("message %s has no field %s", md.FullName(), strings.Join(missing, ", "))}, problems...)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrSchemaMismatch, strings.Join(problems, "; "))
	}
	return plan, nil
}

// bindMessage binds message md to node ni, marking the fields found and
// adding a line to problems for each field of a type its roles do not
// accept. It recurses once per key of a configured path: at most
// MaxPathDepth deep.
func (d *Decoder) bindMessage(md protoreflect.MessageDescriptor, ni int, found []bool, problems *[]string) *pbPlan {
	p := &pbPlan{}
	for _, k := range d.nodes[ni].keys {
		fd := md.Fields().ByName(protoreflect.Name(k.name))
		if fd == nil {
			continue // missing: reported by name by bindProto
		}
		st := pbStep{num: fd.Number(), ref: int(k.ref)}
		if st.ref >= 0 {
			found[st.ref] = true
			if why := d.pbLeaf(fd, &st); why != "" {
				*problems = append(*problems, fmt.Sprintf("field %q %s", d.fields[st.ref].name, why))
				continue
			}
		} else {
			if fd.IsList() || fd.IsMap() || fd.Kind() != protoreflect.MessageKind {
				for _, fi := range d.nodes[^st.ref].fields {
					found[fi] = true
					*problems = append(*problems, fmt.Sprintf("field %q: %s is not a message", d.fields[fi].name, fd.FullName()))
				}
				continue
			}
			st.kind, st.wire = pbMessage, protowire.BytesType
			st.sub = d.bindMessage(fd.Message(), ^st.ref, found, problems)
		}
		if st.implicit {
			p.implicit = append(p.implicit, len(p.steps))
		}
		p.steps = append(p.steps, st)
	}
	p.index()
	return p
}

// pbLeaf sets the kind, wire type and presence of a configured field of
// descriptor fd in st, or says why its roles cannot read it.
func (d *Decoder) pbLeaf(fd protoreflect.FieldDescriptor, st *pbStep) string {
	switch {
	case fd.IsMap():
		return "is a map"
	case fd.IsList():
		return "is repeated"
	}
	if fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == pbTimestampName {
		st.kind, st.wire = pbTimestamp, protowire.BytesType
		if d.fields[st.ref].roles != roleTime {
			return "is " + pbTimestampName + ", which only time_field reads"
		}
		return ""
	}
	kind, ok := pbKinds[fd.Kind()]
	if !ok {
		return "is " + fd.Kind().String() + ", not a scalar"
	}
	st.kind, st.wire, st.implicit = kind, pbWire(kind), !fd.HasPresence()
	if kind == pbEnum {
		st.enum = enumNames(fd.Enum())
	}
	roles := d.fields[st.ref].roles
	numeric := kind != pbString && kind != pbEnum && kind != pbBool
	integer := numeric && kind != pbFloat && kind != pbDouble
	text := kind == pbString || kind == pbEnum || integer
	h := d.cfg.Histogram
	switch {
	case roles&roleTime != 0 && !numeric && kind != pbString:
		return "is " + fd.Kind().String() + ", not a number or string (time_field)"
	case roles&roleTime != 0 && numeric && d.cfg.TimeFormat == TimeRFC3339:
		return "is " + fd.Kind().String() + ", not a string (time_field with time_format rfc3339)"
	case roles&roleTime != 0 && kind == pbString && d.cfg.TimeFormat != TimeRFC3339 && d.cfg.TimeFormat != TimeAuto:
		return "is string, not a number (time_field with time_format " + string(d.cfg.TimeFormat) + ")"
	case roles&roleUnit != 0 && !text:
		return "is " + fd.Kind().String() + ", not a string, enum or integer (unit_field)"
	case roles&roleGroup != 0 && !text && kind != pbBool:
		return "is " + fd.Kind().String() + ", not a string, enum, integer or bool (group_by)"
	case roles&roleHist != 0 && h.Numeric() && !numeric:
		return "is " + fd.Kind().String() + ", not a number (histogram.edges)"
	case roles&roleHist != 0 && !h.Numeric() && !text:
		return "is " + fd.Kind().String() + ", not a string, enum or integer (histogram.categories)"
	case roles&roleValue != 0 && !numeric:
		return "is " + fd.Kind().String() + ", not a number (value_field)"
	case roles&(roleMeasure|roleHistNum) != 0 && !numeric:
		return "is " + fd.Kind().String() + ", not a number (measures, or histograms with edges)"
	case roles&roleHistCat != 0 && !text:
		return "is " + fd.Kind().String() + ", not a string, enum or integer (histograms with categories)"
	}
	return ""
}

// pbKinds maps the scalar kinds of descriptors to the decoder's; bytes,
// messages and groups are absent (no role reads them).
var pbKinds = map[protoreflect.Kind]pbKind{
	protoreflect.Int32Kind: pbInt32, protoreflect.Int64Kind: pbInt64,
	protoreflect.Uint32Kind: pbUint32, protoreflect.Uint64Kind: pbUint64,
	protoreflect.Sint32Kind: pbSint32, protoreflect.Sint64Kind: pbSint64,
	protoreflect.BoolKind: pbBool, protoreflect.EnumKind: pbEnum,
	protoreflect.Fixed32Kind: pbFixed32, protoreflect.Fixed64Kind: pbFixed64,
	protoreflect.Sfixed32Kind: pbSfixed32, protoreflect.Sfixed64Kind: pbSfixed64,
	protoreflect.FloatKind: pbFloat, protoreflect.DoubleKind: pbDouble,
	protoreflect.StringKind: pbString,
}

// pbWire is the wire type of a value of kind k (the encoding section of
// the Protobuf specification).
func pbWire(k pbKind) protowire.Type {
	switch k {
	case pbFixed32, pbSfixed32, pbFloat:
		return protowire.Fixed32Type
	case pbFixed64, pbSfixed64, pbDouble:
		return protowire.Fixed64Type
	case pbString, pbTimestamp, pbMessage:
		return protowire.BytesType
	}
	return protowire.VarintType
}

// enumNames returns the names of ed's values by number; of aliases (two
// names for one number) the first declared.
func enumNames(ed protoreflect.EnumDescriptor) *pbEnumNames {
	e := &pbEnumNames{}
	vals := ed.Values()
	for i := range vals.Len() {
		v := vals.Get(i)
		n := int32(v.Number())
		switch {
		case n >= 0 && int(n) < vals.Len():
			for len(e.dense) <= int(n) {
				e.dense = append(e.dense, nil)
			}
			if e.dense[n] == nil {
				e.dense[n] = []byte(v.Name())
			}
		default:
			if e.sparse == nil {
				e.sparse = map[int32][]byte{}
			}
			if _, dup := e.sparse[n]; !dup {
				e.sparse[n] = []byte(v.Name())
			}
		}
	}
	return e
}
