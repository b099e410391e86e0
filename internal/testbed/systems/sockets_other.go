//go:build !linux

package systems

import (
	"context"
	"errors"
)

// socketLinks needs Linux's sock_diag; elsewhere it reports that.
type socketLinks struct{}

func newSocketLinks(map[int]Direction) *socketLinks { return &socketLinks{} }

func (*socketLinks) LinkBytes(context.Context) (map[Direction]uint64, error) {
	return nil, errors.New("per-link byte counts from sockets need Linux (sock_diag)")
}
