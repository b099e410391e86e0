package clientapi

import (
	"fmt"
	"math"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/wire"
)

// MessageFromProto validates and converts a message.
func MessageFromProto(pm *dripv1.Message, l wire.MessageLimits) (content.Message, error) {
	if pm == nil {
		return content.Message{}, fmt.Errorf("message is missing")
	}
	if l.MaxAttributes > 0 && len(pm.Attributes) > l.MaxAttributes {
		return content.Message{}, fmt.Errorf("message has %d attributes, over the limit of %d", len(pm.Attributes), l.MaxAttributes)
	}
	if l.MaxPayload > 0 && len(pm.Payload) > l.MaxPayload {
		return content.Message{}, fmt.Errorf("message payload is %d bytes, over the limit of %d", len(pm.Payload), l.MaxPayload)
	}
	if len(pm.Congestion) > wire.MaxCongestionHeader {
		return content.Message{}, fmt.Errorf("message congestion header is %d bytes, over the limit of %d", len(pm.Congestion), wire.MaxCongestionHeader)
	}
	attrs := make([]content.Attribute, len(pm.Attributes))
	for i, a := range pm.Attributes {
		if l.MaxName > 0 && len(a.GetName()) > l.MaxName {
			return content.Message{}, fmt.Errorf("attribute %d: name is %d bytes, over the limit of %d", i, len(a.GetName()), l.MaxName)
		}
		v, err := ValueFromProto(a.GetValue())
		if err != nil {
			return content.Message{}, fmt.Errorf("attribute %q: %w", a.GetName(), err)
		}
		if l.MaxString > 0 && len(v.Str()) > l.MaxString {
			return content.Message{}, fmt.Errorf("attribute %q: string value is %d bytes, over the limit of %d", a.GetName(), len(v.Str()), l.MaxString)
		}
		attrs[i] = content.Attribute{Name: a.GetName(), Value: v}
	}
	return content.NewMessage(attrs, pm.Payload)
}

// MessageToProto converts a message; the payload is shared, not copied.
func MessageToProto(m content.Message) *dripv1.Message {
	attrs := m.Attributes()
	pm := &dripv1.Message{Attributes: make([]*dripv1.Attribute, len(attrs)), Payload: m.Payload}
	for i, a := range attrs {
		pm.Attributes[i] = &dripv1.Attribute{Name: a.Name, Value: ValueToProto(a.Value)}
	}
	return pm
}

// ValueFromProto converts a value; an unset value is an error.
func ValueFromProto(pv *dripv1.Value) (content.Value, error) {
	switch k := pv.GetKind().(type) {
	case *dripv1.Value_StringValue:
		return content.String(k.StringValue), nil
	case *dripv1.Value_IntValue:
		return content.Int(k.IntValue), nil
	case *dripv1.Value_FloatValue:
		return content.Float(k.FloatValue), nil
	case *dripv1.Value_BoolValue:
		return content.Bool(k.BoolValue), nil
	default:
		return content.Value{}, fmt.Errorf("value is unset")
	}
}

// ValueToProto converts a value; the invalid Value becomes an unset one.
func ValueToProto(v content.Value) *dripv1.Value {
	switch v.Kind() {
	case content.KindString:
		return &dripv1.Value{Kind: &dripv1.Value_StringValue{StringValue: v.Str()}}
	case content.KindInt:
		return &dripv1.Value{Kind: &dripv1.Value_IntValue{IntValue: v.Int()}}
	case content.KindFloat:
		return &dripv1.Value{Kind: &dripv1.Value_FloatValue{FloatValue: v.Float()}}
	case content.KindBool:
		return &dripv1.Value{Kind: &dripv1.Value_BoolValue{BoolValue: v.Bool()}}
	default:
		return &dripv1.Value{}
	}
}

// PredicateFromProto converts a predicate given structurally, as text, or
// both (their disjunction), enforcing l on both forms.
func PredicateFromProto(pp *dripv1.Predicate, l content.Limits) (content.Predicate, error) {
	if pp == nil || (len(pp.Filters) == 0 && pp.Text == "") {
		return nil, fmt.Errorf("predicate is empty: give filters or text")
	}
	var pred content.Predicate
	if pp.Text != "" {
		p, err := content.ParseWithLimits(pp.Text, l)
		if err != nil {
			return nil, err
		}
		pred = p
	}
	if l.MaxFilters > 0 && len(pred)+len(pp.Filters) > l.MaxFilters {
		return nil, fmt.Errorf("predicate has %d filters, over the limit of %d", len(pred)+len(pp.Filters), l.MaxFilters)
	}
	for i, pf := range pp.Filters {
		f, err := filterFromProto(pf, l)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, err)
		}
		pred = append(pred, f)
	}
	if err := content.CheckMatchable(pred); err != nil {
		return nil, err
	}
	return pred, nil
}

func filterFromProto(pf *dripv1.Filter, l content.Limits) (content.Filter, error) {
	if len(pf.GetConstraints()) == 0 {
		return nil, fmt.Errorf("filter has no constraints")
	}
	if l.MaxConstraints > 0 && len(pf.Constraints) > l.MaxConstraints {
		return nil, fmt.Errorf("filter has %d constraints, over the limit of %d", len(pf.Constraints), l.MaxConstraints)
	}
	f := make(content.Filter, len(pf.Constraints))
	for j, pc := range pf.Constraints {
		c, err := constraintFromProto(pc, l)
		if err != nil {
			return nil, fmt.Errorf("constraint %d: %w", j, err)
		}
		f[j] = c
	}
	return f, nil
}

func constraintFromProto(pc *dripv1.Constraint, l content.Limits) (content.Constraint, error) {
	if l.MaxName > 0 && len(pc.GetName()) > l.MaxName {
		return content.Constraint{}, fmt.Errorf("attribute name is %d bytes, over the limit of %d", len(pc.GetName()), l.MaxName)
	}
	if pc.GetOp() <= dripv1.Op_OP_UNSPECIFIED || pc.GetOp() > dripv1.Op_OP_EXISTS {
		return content.Constraint{}, fmt.Errorf("unknown operator %d", pc.GetOp())
	}
	op := content.Op(pc.GetOp())
	c := content.Constraint{Name: pc.GetName(), Op: op}
	if pc.GetValue() != nil && pc.GetValue().GetKind() != nil {
		v, err := ValueFromProto(pc.GetValue())
		if err != nil {
			return content.Constraint{}, err
		}
		if v.Kind() == content.KindFloat && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
			return content.Constraint{}, fmt.Errorf("constraint value must be a finite number, got %v", v.Float())
		}
		if l.MaxString > 0 && len(v.Str()) > l.MaxString {
			return content.Constraint{}, fmt.Errorf("string value is %d bytes, over the limit of %d", len(v.Str()), l.MaxString)
		}
		c.Value = v
	}
	if err := c.Validate(); err != nil {
		return content.Constraint{}, err
	}
	return c, nil
}

// PredicateToProto converts a predicate to its structured form.
func PredicateToProto(p content.Predicate) *dripv1.Predicate {
	pp := &dripv1.Predicate{Filters: make([]*dripv1.Filter, len(p))}
	for i, f := range p {
		pf := &dripv1.Filter{Constraints: make([]*dripv1.Constraint, len(f))}
		for j, c := range f {
			pc := &dripv1.Constraint{Name: c.Name, Op: dripv1.Op(c.Op)}
			if c.Op != content.OpExists {
				pc.Value = ValueToProto(c.Value)
			}
			pf.Constraints[j] = pc
		}
		pp.Filters[i] = pf
	}
	return pp
}
