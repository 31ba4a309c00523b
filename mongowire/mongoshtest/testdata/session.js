// A sensor session, as a mongosh user types it: create a time-series
// collection, insertMany, finds over a time range sorted by time through
// several getMore batches, list the collections. The results go to stdout
// as one line, "RESULT " and canonical Extended JSON, which
// TestMongoshSession checks against what was inserted.
//
// HG_COLLECTION names the collection, HG_T0_MS is the first measurement's
// time (milliseconds since 1970, on a minute), HG_COUNT how many to insert.
const name = process.env.HG_COLLECTION;
const t0 = Number(process.env.HG_T0_MS);
const count = Number(process.env.HG_COUNT);
const sensors = ['north', 'south', 'east', 'west'];
const coll = db.getCollection(name);
const out = {};

out.create = db.createCollection(name, {
  timeseries: { timeField: 'ts', metaField: 'sensor', granularity: 'seconds' },
  expireAfterSeconds: 86400,
});

// Measurement i: second i after t0, sensor i % 4, temp 20 + i/8, n = i as
// a 32-bit integer.
const docs = [];
for (let i = 0; i < count; i++) {
  docs.push({ ts: new Date(t0 + i * 1000), sensor: sensors[i % 4], temp: 20 + i / 8, n: NumberInt(i) });
}
const ins = coll.insertMany(docs);
out.insert = { acknowledged: ins.acknowledged, ids: Object.keys(ins.insertedIds).length };

// North, seconds [100, 900), newest first, 50 a batch, without temp.
out.north = coll
  .find({ ts: { $gte: new Date(t0 + 100 * 1000), $lt: new Date(t0 + 900 * 1000) }, sensor: 'north' }, { ts: 1, sensor: 1, n: 1 })
  .sort({ ts: -1 })
  .batchSize(50)
  .toArray();

// Every sensor over the whole range, oldest first, iterated one document
// at a time through batches of 300.
out.all = [];
const cur = coll.find({ ts: { $gte: new Date(t0), $lte: new Date(t0 + (count - 1) * 1000) } }).sort({ ts: 1 }).batchSize(300);
while (cur.hasNext()) {
  out.all.push(cur.next());
}

out.names = db.getCollectionNames();
out.infos = db.getCollectionInfos({ name: name });

print('RESULT ' + EJSON.stringify(out, { relaxed: false }));
