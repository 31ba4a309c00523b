// Run authenticated (TestMongoshAuthentication): who the server says the
// connection is, and a command that needs authentication.
db.createCollection('authed');
print('RESULT ' + EJSON.stringify({
  users: db.runCommand({ connectionStatus: 1 }).authInfo.authenticatedUsers,
  names: db.getCollectionNames(),
}, { relaxed: false }));
