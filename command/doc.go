// Package command is the layer between Hourglass's front doors (the HTTP
// API, the MongoDB wire protocol) and the engine. It holds what every door
// shares: admission, starting with the request memory budget (Budget) that
// HTTP bodies and MongoDB messages take from before they are allocated,
// and the size-class buffers they are read into.
package command
