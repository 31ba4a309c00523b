"""A sensor session through PyMongo, every result checked.

HG_URI is the connection string (credentials included when the server
needs them), HG_T0_MS the first measurement's time in milliseconds (on a
minute), HG_COUNT how many measurements to insert. The script prints one
line, "RESULT " and JSON, that the Go test checks against the engine; any
failed check raises, and the script exits with its message.
"""
import datetime
import json
import os
import sys

import pymongo
from pymongo import ASCENDING, DESCENDING, MongoClient
from pymongo.errors import BulkWriteError, OperationFailure
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

uri = os.environ["HG_URI"]
t0 = datetime.datetime.fromtimestamp(int(os.environ["HG_T0_MS"]) / 1000, tz=datetime.timezone.utc).replace(tzinfo=None)
count = int(os.environ["HG_COUNT"])
sensors = ["north", "south", "east", "west"]


def check(cond, what, got=None):
    if not cond:
        raise AssertionError("%s (got %r)" % (what, got))


client = MongoClient(uri, serverSelectionTimeoutMS=10000)
db = client["hourglass"]
out = {"pymongo": pymongo.version}

check(client.admin.command("ping")["ok"] == 1.0, "ping")

# A time-series collection with a collection-level TTL.
db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "sensor", "granularity": "seconds"},
                     expireAfterSeconds=86400)
infos = {c["name"]: c for c in db.list_collections()}
check(infos["weather"]["type"] == "timeseries", "weather is a time-series collection", infos.get("weather"))
check(infos["weather"]["options"]["timeseries"]["timeField"] == "ts", "timeField", infos["weather"]["options"])
check(infos["weather"]["options"]["expireAfterSeconds"] == 86400, "expireAfterSeconds", infos["weather"]["options"])

# Measurement i: second i after t0, sensor i % 4, temp 20 + i/8, n = i.
weather = db["weather"]
docs = [{"ts": t0 + datetime.timedelta(seconds=i), "sensor": sensors[i % 4], "temp": 20 + i / 8, "n": i}
        for i in range(count)]
res = weather.insert_many(docs)
check(len(res.inserted_ids) == count, "insert_many acknowledged every document", len(res.inserted_ids))

# Ordered and unordered inserts with a bad document (no date in ts).
bad = [{"ts": t0 + datetime.timedelta(seconds=count), "sensor": "north", "temp": 1.0, "n": count},
       {"ts": "not a date", "sensor": "north"},
       {"ts": t0 + datetime.timedelta(seconds=count + 1), "sensor": "north", "temp": 2.0, "n": count + 1}]
try:
    weather.insert_many(bad, ordered=True)
    raise AssertionError("an ordered insert with a bad document succeeded")
except BulkWriteError as e:
    d = e.details
    check(d["nInserted"] == 1, "ordered: the prefix is stored", d)
    check([w["index"] for w in d["writeErrors"]] == [1] and d["writeErrors"][0]["code"] == 2, "ordered: one write error", d)
try:
    weather.insert_many(bad[1:], ordered=False)
    raise AssertionError("an unordered insert with a bad document succeeded")
except BulkWriteError as e:
    d = e.details
    check(d["nInserted"] == 1, "unordered: the good one is stored", d)
    check([w["index"] for w in d["writeErrors"]] == [0], "unordered: one write error", d)
total = count + 2

# A time range of one sensor, newest first, without temp, through several
# getMore batches.
lo, hi = t0 + datetime.timedelta(seconds=100), t0 + datetime.timedelta(seconds=900)
got = list(weather.find({"ts": {"$gte": lo, "$lt": hi}, "sensor": "north"}, {"ts": 1, "sensor": 1, "n": 1, "_id": 0})
           .sort("ts", DESCENDING).batch_size(50))
want = [i for i in range(899, 99, -1) if i % 4 == 0]
check([d["n"] for d in got] == want, "north, [100, 900) s, newest first", [d.get("n") for d in got[:5]])
check(all("temp" not in d for d in got), "the projection leaves temp out", got[:1])
check(all(d["ts"] == t0 + datetime.timedelta(seconds=d["n"]) for d in got), "each ts matches its n", got[:1])
out["north"] = len(got)

check(weather.count_documents({}) == total, "count_documents", weather.count_documents({}))
check(weather.count_documents({"sensor": "east"}) == len([i for i in range(count) if i % 4 == 2]), "count east")
check(sorted(weather.distinct("sensor")) == sorted(sensors), "distinct sensor", weather.distinct("sensor"))

# Per-minute averages of one sensor.
pipeline = [{"$match": {"sensor": "south"}},
            {"$group": {"_id": {"$dateTrunc": {"date": "$ts", "unit": "minute"}}, "avg": {"$avg": "$temp"}, "n": {"$count": {}}}},
            {"$sort": {"_id": 1}}]
minutes = list(weather.aggregate(pipeline))
south = [i for i in range(count) if i % 4 == 1]
by_minute = {}
for i in south:
    by_minute.setdefault(i // 60, []).append(20 + i / 8)
check(len(minutes) == len(by_minute), "one group a minute", len(minutes))
for m in minutes:
    k = int((m["_id"] - t0).total_seconds()) // 60
    vals = by_minute[k]
    check(m["n"] == len(vals) and abs(m["avg"] - sum(vals) / len(vals)) < 1e-9, "minute %d average" % k, m)
out["minutes"] = len(minutes)

# Per-sensor retention: a partial TTL index on the meta field.
name = weather.create_index([("ts", ASCENDING)], partialFilterExpression={"sensor": {"$eq": "north"}},
                            expireAfterSeconds=3600)
idx = {i["name"]: i for i in weather.list_indexes()}
check(idx[name]["expireAfterSeconds"] == 3600 and idx[name]["partialFilterExpression"] == {"sensor": {"$eq": "north"}},
      "the partial TTL index", idx.get(name))
r = db.command("collMod", "weather", index={"name": name, "expireAfterSeconds": 7200})
check(r["expireAfterSeconds_old"] == 3600 and r["expireAfterSeconds_new"] == 7200, "collMod of the index", r)
idx = {i["name"]: i for i in weather.list_indexes()}
check(idx[name]["expireAfterSeconds"] == 7200, "collMod took effect", idx[name])
weather.drop_index(name)
check(name not in {i["name"] for i in weather.list_indexes()}, "drop_index")
try:
    weather.create_index([("ts", ASCENDING)], partialFilterExpression={"temp": {"$gt": 1}}, expireAfterSeconds=60)
    raise AssertionError("a partial TTL index on a measurement field was accepted")
except OperationFailure as e:
    check(e.code in (67, 2, 72), "a filter outside the meta field is refused", (e.code, str(e)))

# Deletes on the meta field.
r = weather.delete_many({"sensor": "west"})
check(r.deleted_count == len([i for i in range(count) if i % 4 == 3]), "delete_many west", r.deleted_count)
total -= r.deleted_count
check(weather.count_documents({}) == total, "count after the delete", weather.count_documents({}))
out["weather"] = total

# A plain collection with a TTL index, updated and deleted from.
events = db["eventlog"]
events.create_index([("lastModifiedDate", ASCENDING)], expireAfterSeconds=3600)
# Modified now: the index's hour has not passed, whatever the TTL monitor does.
now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
events.insert_many([{"_id": k, "lastModifiedDate": now, "state": "new"} for k in range(10)])
r = events.update_one({"_id": 3}, {"$set": {"state": "seen"}})
check(r.matched_count == 1 and r.modified_count == 1, "update_one", (r.matched_count, r.modified_count))
check(events.find_one({"_id": 3})["state"] == "seen", "the update is read back")
r = events.delete_many({"_id": {"$gte": 8}})
check(r.deleted_count == 2, "delete_many on _id", r.deleted_count)
idx = {i["name"]: i for i in events.list_indexes()}
check(idx["lastModifiedDate_1"]["expireAfterSeconds"] == 3600, "the plain TTL index", idx)
out["eventlog"] = events.count_documents({})

# A plain document reads back as written: its types and its field order,
# nested too, and an update keeps both.
fid = db["fidelity"]
fid.insert_one({"_id": 1, "zeta": 7, "alpha": Int64(7), "dec": Decimal128("1.10"), "bin": Binary(b"\x00\x01", 0),
                "mid": {"z": 1.5, "a": [1, {"y": 2, "b": 3}]}})
got = fid.find_one({"_id": 1})
check(list(got.keys()) == ["_id", "zeta", "alpha", "dec", "bin", "mid"], "field order", list(got.keys()))
check(list(got["mid"].keys()) == ["z", "a"] and list(got["mid"]["a"][1].keys()) == ["y", "b"], "nested field order", got["mid"])
check(type(got["zeta"]) is int and type(got["alpha"]) is Int64, "int32 and int64 kept apart", (type(got["zeta"]), type(got["alpha"])))
check(str(got["dec"]) == "1.10", "Decimal128 exactly as written", got["dec"])
check(got["bin"] == b"\x00\x01", "binary data", got["bin"])
fid.update_one({"_id": 1}, {"$set": {"alpha": Int64(8), "new": 1}, "$inc": {"zeta": 1}})
got = fid.find_one({"_id": 1})
check(list(got.keys()) == ["_id", "zeta", "alpha", "dec", "bin", "mid", "new"], "field order after an update", list(got.keys()))
check(type(got["zeta"]) is int and got["zeta"] == 8 and type(got["alpha"]) is Int64, "types after an update", got)

# A time-series measurement reads back the same way: the time and meta
# fields first, then the others as written, the _id PyMongo made.
db.create_collection("tsfid", timeseries={"timeField": "t", "metaField": "s"})
tsf = db["tsfid"]
made = tsf.insert_one({"t": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), "s": "a", "zeta": 7, "alpha": Int64(7),
                       "dec": Decimal128("1.10"), "bin": Binary(b"\x00\x01", 0), "mid": {"z": 1.5, "a": [1, {"y": 2, "b": 3}]},
                       "nul": None}).inserted_id
got = tsf.find_one({"_id": made})
check(got is not None and list(got.keys()) == ["t", "s", "_id", "zeta", "alpha", "dec", "bin", "mid", "nul"], "measurement field order", got)
check(got["nul"] is None, "a null field reads back null", got)
check(list(got["mid"].keys()) == ["z", "a"] and list(got["mid"]["a"][1].keys()) == ["y", "b"], "nested order in a measurement", got["mid"])
check(type(got["zeta"]) is int and type(got["alpha"]) is Int64 and str(got["dec"]) == "1.10" and got["bin"] == b"\x00\x01",
      "measurement types", got)
# Meta values keep their types: an int inside a sub-document, an Int64,
# an ObjectId.
db.create_collection("tsmeta", timeseries={"timeField": "t", "metaField": "sensor"})
tsm = db["tsmeta"]
oid = ObjectId("650102030405060708090a0b")
t1 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
tsm.insert_many([{"t": t1, "sensor": {"sensorId": 5578, "type": "t"}, "n": 0},
                 {"t": t1 + datetime.timedelta(seconds=1), "sensor": Int64(5578), "n": 1},
                 {"t": t1 + datetime.timedelta(seconds=2), "sensor": oid, "n": 2}])
metas = [d["sensor"] for d in tsm.find({}, {"_id": 0}).sort("t", ASCENDING)]
check(type(metas[0]["sensorId"]) is int and metas[0] == {"sensorId": 5578, "type": "t"}, "an int meta field reads back an int", metas)
check(type(metas[1]) is Int64 and metas[1] == 5578, "an Int64 meta reads back an Int64", metas)
check(metas[2] == oid, "an ObjectId meta reads back", metas)
out["fidelity"] = True

# A collection dropped.
db.create_collection("scratch")
db["scratch"].drop()
check("scratch" not in db.list_collection_names(), "drop")

print("RESULT " + json.dumps(out))
