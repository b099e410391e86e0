//go:build !linux

package netem

import "errors"

var errNotLinux = errors.New("netem: traffic control needs Linux")

// Netlink is the real TC; it exists only on Linux.
type Netlink struct{}

var _ TC = (*Netlink)(nil)

// OpenNetlink fails: traffic control needs Linux.
func OpenNetlink(string) (*Netlink, error) { return nil, errNotLinux }

// Close does nothing.
func (*Netlink) Close() {}

func (*Netlink) Qdiscs() ([]Qdisc, error)   { return nil, errNotLinux }
func (*Netlink) AddQdisc(Qdisc) error       { return errNotLinux }
func (*Netlink) ChangeQdisc(Qdisc) error    { return errNotLinux }
func (*Netlink) DeleteQdisc(Qdisc) error    { return errNotLinux }
func (*Netlink) Classes() ([]Class, error)  { return nil, errNotLinux }
func (*Netlink) AddClass(Class) error       { return errNotLinux }
func (*Netlink) ChangeClass(Class) error    { return errNotLinux }
func (*Netlink) DeleteClass(Class) error    { return errNotLinux }
func (*Netlink) Filters() ([]Filter, error) { return nil, errNotLinux }
func (*Netlink) AddFilter(Filter) error     { return errNotLinux }
func (*Netlink) DeleteFilter(Filter) error  { return errNotLinux }
