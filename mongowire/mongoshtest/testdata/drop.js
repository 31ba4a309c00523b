// The end of the session: drop the collection and list what is left.
const name = process.env.HG_COLLECTION;
const out = {};
out.drop = db.getCollection(name).drop();
out.names = db.getCollectionNames();
print('RESULT ' + EJSON.stringify(out, { relaxed: false }));
