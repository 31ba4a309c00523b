//go:build !unix

package mongowire

// availableConnections is how many connections the process could hold: no
// limit is known here, so MongoDB's default maxIncomingConnections.
func availableConnections() int { return 1000000 }
