package linkstate_test

import (
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/linkstate"
)

// An external test package, so that drp may one day import linkstate.
var _ drp.Routing = (*linkstate.Table)(nil)
