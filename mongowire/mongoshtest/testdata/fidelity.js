// A plain document written from mongosh and read back: its types and its
// field order, nested too, then after an update.
const c = db.getCollection('fidelity');
c.insertOne({ _id: 1, zeta: 7, alpha: Long('7'), dec: NumberDecimal('1.10'), bin: BinData(0, 'AAE='),
  mid: { z: 1.5, a: [1, { y: 2, b: 3 }] } });
const out = { read: c.findOne({ _id: 1 }) };
c.updateOne({ _id: 1 }, { $set: { alpha: Long('8'), new: 1 }, $inc: { zeta: 1 } });
out.updated = c.findOne({ _id: 1 });
// A measurement of a time series: the same types, the fields after the
// time and meta fields in the order written, and the _id mongosh made.
db.createCollection('tsfid', { timeseries: { timeField: 't', metaField: 's' } });
const ts = db.getCollection('tsfid');
const made = ts.insertOne({ t: ISODate('2026-01-01T00:00:00Z'), s: 'a', zeta: 7, alpha: Long('7'), dec: NumberDecimal('1.10'),
  bin: BinData(0, 'AAE='), mid: { z: 1.5, a: [1, { y: 2, b: 3 }] }, nul: null }).insertedId;
out.ts = ts.findOne();
out.tsById = ts.countDocuments({ _id: made });
// Meta values of several types: what mongosh writes reads back so.
db.createCollection('tsmeta', { timeseries: { timeField: 't', metaField: 'sensor' } });
const tm = db.getCollection('tsmeta');
tm.insertMany([
  { t: ISODate('2026-01-01T00:00:00Z'), sensor: { sensorId: 5578, type: 'temperature' }, n: 0 },
  { t: ISODate('2026-01-01T00:00:01Z'), sensor: Long('5578'), n: 1 },
  { t: ISODate('2026-01-01T00:00:02Z'), sensor: ObjectId('650102030405060708090a0b'), n: 2 },
  { t: ISODate('2026-01-01T00:00:03Z'), sensor: NumberDecimal('1.10'), n: 3 },
]);
out.metas = tm.find({}, { _id: 0 }).sort({ t: 1 }).toArray().map((d) => d.sensor);
out.metaIds = tm.countDocuments({ 'sensor.sensorId': 5578 });
print('RESULT ' + EJSON.stringify(out, { relaxed: false }));
