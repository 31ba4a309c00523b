// The rest of the session, on the collection session.js filled: the
// commands of MongoDB's TTL documentation, counts, distinct, aggregate per
// minute, deletes and updates. Each step's outcome goes to stdout, in the
// "RESULT " line, as {ok: 1, value} or {ok: 0, code, codeName, errmsg}, so
// that TestMongoshSession checks every step, the refusals it expects too.
const name = process.env.HG_COLLECTION;
const t0 = Number(process.env.HG_T0_MS);
const coll = db.getCollection(name);
const out = {};

function step(key, f) {
  try {
    out[key] = { ok: 1, value: f() };
  } catch (e) {
    out[key] = { ok: 0, code: e.code ?? null, codeName: e.codeName ?? null, errmsg: String(e.message) };
  }
}

step('countNorth', () => coll.countDocuments({ sensor: 'north' }));
step('estimatedCount', () => coll.estimatedDocumentCount());
step('distinct', () => coll.distinct('sensor'));
step('perMinute', () =>
  coll
    .aggregate([
      { $match: { sensor: 'north' } },
      { $group: { _id: { $dateTrunc: { date: '$ts', unit: 'minute' } }, n: { $count: {} }, avg: { $avg: '$temp' } } },
      { $sort: { _id: 1 } },
    ])
    .toArray(),
);

// A per-sensor TTL, then the documentation's collMod of its expiry.
step('createIndex', () =>
  coll.createIndex({ ts: 1 }, { name: 'east_hour', partialFilterExpression: { sensor: { $eq: 'east' } }, expireAfterSeconds: 3600 }),
);
step('getIndexes', () => coll.getIndexes());
step('collMod', () => db.runCommand({ collMod: name, index: { keyPattern: { ts: 1 }, expireAfterSeconds: 7200 } }));
step('getIndexesAfterCollMod', () => coll.getIndexes());
// One version of the documentation passes expireAfterSeconds as a third
// argument, which mongosh sends as commitQuorum: an error must say where
// it belongs.
step('createIndexThirdArgument', () =>
  coll.createIndex({ ts: 1 }, { name: 'west_hour', partialFilterExpression: { sensor: { $eq: 'west' } } }, { expireAfterSeconds: 3600 }),
);
step('dropIndex', () => coll.dropIndex('east_hour'));

step('ttlMetrics', () => db.serverStatus().metrics.ttl);
step('currentOp', () => db.currentOp().inprog);
step('setParameter', () => db.adminCommand({ setParameter: 1, ttlMonitorEnabled: false }));
step('getParameter', () => db.adminCommand({ getParameter: 1, ttlMonitorEnabled: 1 }));
step('setParameterBack', () => db.adminCommand({ setParameter: 1, ttlMonitorEnabled: true }));

step('deleteWest', () => coll.deleteMany({ sensor: 'west' }));
step('countAfterDelete', () => coll.countDocuments());

// A plain collection: the documentation's tickets.
const tickets = db.getCollection('tickets');
tickets.insertMany([
  { _id: 1, status: 'open', lastModifiedDate: new Date(t0) },
  { _id: 2, status: 'open', lastModifiedDate: new Date(t0) },
  { _id: 3, status: 'open', lastModifiedDate: new Date(t0) },
]);
step('updateOne', () => tickets.updateOne({ _id: 1 }, { $set: { status: 'closed' } }));
step('afterUpdate', () => tickets.find({ _id: 1 }).toArray());
step('deleteOne', () => tickets.deleteOne({ _id: 2 }));
step('ticketsCount', () => tickets.countDocuments());
step('ticketsTTL', () => tickets.createIndex({ lastModifiedDate: 1 }, { expireAfterSeconds: 3600 }));
tickets.drop();

print('RESULT ' + EJSON.stringify(out, { relaxed: false }));
