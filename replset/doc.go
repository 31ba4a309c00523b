// Package replset replicates an Hourglass engine across the members of a
// replica set with Raft (github.com/hashicorp/raft).
package replset
