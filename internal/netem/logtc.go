package netem

import (
	"fmt"

	"go.uber.org/zap"
)

// loggingTC logs every change made through it at debug level, so
// --log-level debug shows exactly what each pass did to the device.
type loggingTC struct {
	TC
	log *zap.Logger
}

func (l loggingTC) note(op string, obj fmt.Stringer, err error) error {
	if ce := l.log.Check(zap.DebugLevel, "tc "+op); ce != nil {
		ce.Write(zap.Stringer("object", obj), zap.Error(err))
	}
	return err
}

func (l loggingTC) AddQdisc(q Qdisc) error      { return l.note("add", q, l.TC.AddQdisc(q)) }
func (l loggingTC) ChangeQdisc(q Qdisc) error   { return l.note("change", q, l.TC.ChangeQdisc(q)) }
func (l loggingTC) DeleteQdisc(q Qdisc) error   { return l.note("delete", q, l.TC.DeleteQdisc(q)) }
func (l loggingTC) AddClass(c Class) error      { return l.note("add", c, l.TC.AddClass(c)) }
func (l loggingTC) ChangeClass(c Class) error   { return l.note("change", c, l.TC.ChangeClass(c)) }
func (l loggingTC) DeleteClass(c Class) error   { return l.note("delete", c, l.TC.DeleteClass(c)) }
func (l loggingTC) AddFilter(f Filter) error    { return l.note("add", f, l.TC.AddFilter(f)) }
func (l loggingTC) DeleteFilter(f Filter) error { return l.note("delete", f, l.TC.DeleteFilter(f)) }
