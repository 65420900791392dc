// DuckDB workloads for specs/parquet.yaml. Each subcommand is one memory
// promise that data engines make, and sometimes break.
//
//   node work.mjs generate FILE SCALE       the fixture: 2,000,000 x SCALE rows of
//                                           an id and 50 random doubles (~800 MB at 1)
//   node work.mjs one-column FILE           project one column, aggregate it
//   node work.mjs all-columns-js FILE       read every column into JS objects
//   node work.mjs streaming FILE LIMIT      aggregate all columns, DuckDB budget LIMIT
//   node work.mjs sort FILE LIMIT DIR       sort larger than LIMIT, spilling to DIR
//   node work.mjs sort-no-spill FILE SCALE  the same sort with spilling disabled
//                                           (below scale 0.5, of the scale-0.5 data)
import { DuckDBInstance } from '@duckdb/node-api';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [cmd, file, ...args] = process.argv.slice(2);

async function connect(options = {}) {
  // Two threads: the machines have two cores, and DuckDB's memory grows
  // with its thread count.
  const instance = await DuckDBInstance.create(':memory:', { threads: '2', ...options });
  return instance.connect();
}

async function scalar(conn, sql) {
  const reader = await conn.runAndReadAll(sql);
  return reader.getRows()[0][0];
}

const columns = (n) => Array.from({ length: n }, (_, i) => `c${i}`);

// A FIFO that `cat` drains into /dev/null: where COPY writes rows nobody
// needs, outside the JS heap (draining gigabytes through a JS stream grew the
// sort's working set by tens of MiB). Not '/dev/null' itself: DuckDB locks
// the file it copies to, and two sorts at once (memrun -j) failed on each
// other's lock. The shell removes the FIFO once it has opened it (which
// waits for DuckDB to open the other end), so that a sort killed midway
// leaves nothing behind.
function discarding_fifo() {
  const dir = mkdtempSync(join(tmpdir(), 'memrun-sort-'));
  const path = join(dir, 'rows.csv');
  execFileSync('mkfifo', [path]);
  const drainer = spawn('sh', ['-c', 'exec <"$1" && rm -rf "$2" && exec cat >/dev/null', 'sh', path, dir],
                        { stdio: 'ignore' });
  const drained = new Promise((resolve, reject) =>
    drainer.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`draining the sorted rows: exit ${code}`)))));
  return { path, drained, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

switch (cmd) {
  case 'generate': {
    const scale = Number(args[0]);
    if (!(scale > 0)) throw new Error(`MEMRUN_SCALE must be a positive number, not '${args[0]}'`);
    const rows = Math.round(2_000_000 * scale), cols = 50;
    const { mkdirSync } = await import('node:fs');
    const { dirname } = await import('node:path');
    mkdirSync(dirname(file), { recursive: true });
    const conn = await connect();
    const select = columns(cols).map((c) => `random() AS ${c}`).join(', ');
    await conn.run(`COPY (SELECT range AS id, ${select} FROM range(${rows}))
                    TO '${file}.tmp' (FORMAT parquet, ROW_GROUP_SIZE 100000)`);
    // Renamed only once complete, so that a killed setup never leaves a
    // half-written fixture that looks up to date.
    const { renameSync } = await import('node:fs');
    renameSync(`${file}.tmp`, file);
    console.log(`wrote ${rows} x ${cols} to ${file}`);
    break;
  }
  case 'one-column': {
    const conn = await connect();
    console.log('sum(c0) =', await scalar(conn, `SELECT sum(c0) FROM read_parquet('${file}')`));
    break;
  }
  case 'all-columns-js': {
    // What a careless reader does: every row of every column becomes a JS
    // object kept in the heap. DuckDB streams chunks; its own budget (which
    // it derives from the cgroup limit) is lifted so that the kernel, not
    // DuckDB, is what stops the reader.
    const conn = await connect({ memory_limit: '64GB' });
    const result = await conn.stream(`SELECT * FROM read_parquet('${file}')`);
    const names = result.deduplicatedColumnNames();
    const rows = [];
    for (let chunk = await result.fetchChunk(); chunk && chunk.rowCount > 0; chunk = await result.fetchChunk())
      for (const row of chunk.getRowObjects(names)) rows.push(row);
    let sum = 0;
    for (const r of rows) sum += r.c0;
    console.log(`${rows.length} rows in the JS heap, sum(c0) = ${sum}`);
    break;
  }
  case 'streaming': {
    const conn = await connect({ memory_limit: args[0] });
    const sums = columns(50).map((c) => `sum(${c})`).join(' + ');
    console.log('total =', await scalar(conn, `SELECT ${sums} FROM read_parquet('${file}')`));
    break;
  }
  case 'sort':
  case 'sort-no-spill': {
    // A full sort of every column: what it holds is the size of the data.
    // With a budget and a temp directory DuckDB spills sorted runs to disk;
    // without, it grows until something stops it. The sorted rows are
    // written and thrown away, so that nothing but the sort needs memory.
    const spill = cmd === 'sort';
    // Without spilling DuckDB gets a budget above the cgroup limit, so the
    // kernel, not DuckDB, is what stops it.
    const conn = await connect(spill ? { memory_limit: args[0], temp_directory: args[1] }
                                     : { memory_limit: '64GB', temp_directory: '' });
    // Below scale 0.5 (SCALE, the last argument of sort-no-spill), the file
    // is read as many times over as makes the data of scale 0.5, so that
    // the sort outgrows its limit at every scale the spec runs at.
    const copies = spill ? 1 : Math.max(1, Math.ceil(0.5 / Number(args[0] || 1)));
    const files = Array(copies).fill(`'${file}'`).join(', ');
    const sink = discarding_fifo();
    try {
      await conn.run(`COPY (SELECT * FROM read_parquet([${files}]) ORDER BY c0)
                      TO '${sink.path}' (FORMAT csv)`);
      await sink.drained;
    } finally {
      sink.remove();
    }
    console.log('sorted');
    break;
  }
  default:
    console.error(`unknown command '${cmd}'`);
    process.exit(2);
}
