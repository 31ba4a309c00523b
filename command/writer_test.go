package command_test

import (
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/replset"
)

// A replica set member writes as the engine does.
var _ command.Writer = (*replset.Node)(nil)
