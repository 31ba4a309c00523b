package mongowire

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// AuthUser is the user MongoDB clients authenticate as when the server
// has an auth token: the password is the token (docs/mongodb.md).
const AuthUser = "hourglass"

// authMechanism is the one SASL mechanism offered: SCRAM-SHA-256, which
// every current driver and mongosh speak.
const authMechanism = "SCRAM-SHA-256"

// scramIterations is the PBKDF2 iteration count of the stored credential:
// MongoDB's default for SCRAM-SHA-256 (scramSHA256IterationCount).
const scramIterations = 15000

// codeMechanismUnavailable is MongoDB's answer to a SASL mechanism it does
// not offer.
const codeMechanismUnavailable = mongoerr.MechanismUnavailable

// newSCRAM returns the SCRAM-SHA-256 server that checks AuthUser's
// password against token, with a credential salted afresh at every start.
func newSCRAM(token string) (*scram.Server, error) {
	cl, err := scram.SHA256.NewClient(AuthUser, token, "")
	if err != nil {
		return nil, fmt.Errorf("mongowire: the auth token cannot be a SCRAM password: %w", err)
	}
	salt := make([]byte, 16)
	rand.Read(salt)
	creds, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	if err != nil {
		return nil, fmt.Errorf("mongowire: SCRAM credential: %w", err)
	}
	return scram.SHA256.NewServer(func(user string) (scram.StoredCredentials, error) {
		if user != AuthUser {
			return scram.StoredCredentials{}, errUnknownUser
		}
		return creds, nil
	})
}

var errUnknownUser = errors.New("mongowire: unknown user")

// errAuthFailed is MongoDB's answer to a wrong user or password: it does
// not say which.
func errAuthFailed() error {
	return mongoerr.New(mongoerr.AuthenticationFailed, "Authentication failed.")
}

// saslConversation is a connection's authentication in progress.
type saslConversation struct {
	id   int32
	conv *scram.ServerConversation
}

// saslStart begins a SCRAM conversation from the client's first message
// (saslStart, or hello's speculativeAuthenticate) and returns the server's
// first message.
func (c *conn) saslStart(body bsoncore.Document) (bson.D, error) {
	s := c.s
	if s.scram == nil {
		return nil, mongoerr.New(codeMechanismUnavailable, "Authentication is not enabled: the server runs without --auth-token")
	}
	mv, _ := body.LookupErr("mechanism")
	if mech, _ := mv.StringValueOK(); mech != authMechanism {
		return nil, mongoerr.New(codeMechanismUnavailable, "Received authentication for mechanism %s which is not enabled; Hourglass offers %s", mv, authMechanism)
	}
	payload, err := saslPayload(body)
	if err != nil {
		return nil, err
	}
	c.sasl = &saslConversation{id: c.sasl.nextID(), conv: s.scram.NewConversation()}
	out, err := c.sasl.conv.Step(string(payload))
	if err != nil {
		c.sasl = nil
		return nil, errAuthFailed()
	}
	return bson.D{{Key: "conversationId", Value: c.sasl.id}, {Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte(out)}}}, nil
}

func (sc *saslConversation) nextID() int32 {
	if sc == nil {
		return 1
	}
	return sc.id + 1
}

func saslPayload(body bsoncore.Document) ([]byte, error) {
	v, err := body.LookupErr("payload")
	if err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "SASL payload is missing")
	}
	if _, data, ok := v.BinaryOK(); ok {
		return data, nil
	}
	if str, ok := v.StringValueOK(); ok {
		return []byte(str), nil
	}
	return nil, mongoerr.New(mongoerr.TypeMismatch, "SASL payload must be binary data or a string")
}

func cmdSaslStart(s *Server, c *conn, cmd *wireCommand) (bson.D, error) {
	return c.saslStart(cmd.body)
}

// cmdSaslContinue takes the client's final message, checks its proof and
// answers the server's signature; the connection is then authenticated.
// An empty message after that (clients that do not skip the empty
// exchange) ends the conversation.
func cmdSaslContinue(s *Server, c *conn, cmd *wireCommand) (bson.D, error) {
	iv, _ := cmd.body.LookupErr("conversationId")
	id, ok := iv.AsInt64OK()
	if !ok || c.sasl == nil || int64(c.sasl.id) != id {
		return nil, mongoerr.New(mongoerr.BadValue, "No SASL session state found for conversationId %v", iv)
	}
	payload, err := saslPayload(cmd.body)
	if err != nil {
		return nil, err
	}
	sc := c.sasl
	if sc.conv.Done() {
		c.sasl = nil
		if !sc.conv.Valid() || len(payload) != 0 {
			return nil, errAuthFailed()
		}
		return bson.D{{Key: "conversationId", Value: sc.id}, {Key: "done", Value: true}, {Key: "payload", Value: bson.Binary{Data: []byte{}}}}, nil
	}
	out, err := sc.conv.Step(string(payload))
	if err != nil || !sc.conv.Valid() {
		c.sasl = nil
		s.log.Info("MongoDB client failed to authenticate", "conn", c.id, "remote", c.nc.RemoteAddr().String())
		return nil, errAuthFailed()
	}
	c.user = sc.conv.Username()
	return bson.D{{Key: "conversationId", Value: sc.id}, {Key: "done", Value: true},
		{Key: "payload", Value: bson.Binary{Data: []byte(out)}}}, nil
}

// helloAuth adds to a hello reply what authentication needs: the
// mechanisms of the user named in saslSupportedMechs (offered for any
// name, so that a wrong one fails as a wrong password does), and the
// answer to speculativeAuthenticate, which saves a round trip. A failed
// speculative start is left out of the reply: the client then
// authenticates with saslStart and sees the error.
func (c *conn) helloAuth(cmd *wireCommand, d bson.D) bson.D {
	if c.s.scram == nil {
		return d
	}
	if _, err := cmd.body.LookupErr("saslSupportedMechs"); err == nil {
		d = append(d, bson.E{Key: "saslSupportedMechs", Value: bson.A{authMechanism}})
	}
	if v, err := cmd.body.LookupErr("speculativeAuthenticate"); err == nil {
		if doc, ok := v.DocumentOK(); ok {
			if _, err := doc.LookupErr("saslStart"); err == nil {
				if reply, err := c.saslStart(doc); err == nil {
					d = append(d, bson.E{Key: "speculativeAuthenticate", Value: reply})
				}
			}
		}
	}
	return d
}
