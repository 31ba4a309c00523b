// Reads every Parquet file under the directory given, as DuckDB reads an
// archive in place, and prints per sensor the count and average of v as
// JSON lines sorted by sensor.
import { DuckDBInstance } from '@duckdb/node-api';

const dir = process.argv[2];
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
const r = await con.runAndReadAll(`
  SELECT sensor, count(*)::BIGINT AS n, avg(v) AS avg, min(t)::VARCHAR AS first, max(t)::VARCHAR AS last
  FROM read_parquet('${dir}/**/*.parquet', hive_partitioning = true, union_by_name = true)
  GROUP BY sensor ORDER BY sensor`);
for (const row of r.getRowObjectsJson()) {
  console.log(JSON.stringify(row));
}
