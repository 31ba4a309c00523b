// Writes the archived rows of a collection for a range of days as NDJSON
// that POST /v1/collections/{name}/documents takes back (docs/archive.md,
// "Restore"): node restore.mjs <archive dir> <collection> <first day>
// <last day> <out file>.
import { DuckDBInstance } from '@duckdb/node-api';

const [dir, coll, from, to, out] = process.argv.slice(2);
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
await con.run(`
  COPY (
    SELECT {'$date': strftime(t, '%Y-%m-%dT%H:%M:%S.%gZ')} AS t, * EXCLUDE (t, date, "$meta")
    FROM read_parquet('${dir}/${coll}/**/*.parquet', hive_partitioning = true, union_by_name = true)
    WHERE date BETWEEN '${from}' AND '${to}'
  ) TO '${out}' (FORMAT json)`);
