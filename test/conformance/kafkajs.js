#!/usr/bin/env node
// Conformance driver for kafkajs (pinned in package.json, installed into
// ./node_modules by scripts/install-test-deps.sh).
//
//   node kafkajs.js COMMAND --bootstrap 127.0.0.1:PORT [options]
//
// Commands: codecs, metadata, create, produce, transact, consume, member — the same contract
// as the Python drivers (see common.py): one JSON summary on the last stdout line,
// or one JSON event per line for "member". Record generation matches common.py.
//
// kafkajs has gzip built in (other codecs need extra npm packages; not used) and
// only a group consumer: "consume" therefore needs the group coordinator.
// It has neither static membership nor cooperative rebalancing.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const path = require('path')
const { Kafka, CompressionTypes, Partitioners, logLevel } = require(path.join(__dirname, 'node_modules', 'kafkajs'))

const CLIENT = 'kafkajs'

function parseArgs (argv) {
  const args = {
    command: argv[0],
    bootstrap: '',
    topic: '',
    partitions: 3,
    codec: 'none',
    keys: 10,
    perKey: 20,
    tag: 't',
    expect: 0,
    timeout: 60,
    group: '',
    instanceId: '',
    assignor: '',
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 1000,
    maxPollIntervalMs: 0,
    maxPollRecords: 0,
    processDelayMs: 0,
    commit: false,
    securityProtocol: 'PLAINTEXT',
    saslMechanism: '',
    user: '',
    password: '',
    ca: '',
    isolation: 'read_uncommitted',
    txnId: ''
  }
  const numeric = new Set(['partitions', 'keys', 'perKey', 'expect', 'timeout', 'sessionTimeoutMs',
    'heartbeatIntervalMs', 'maxPollIntervalMs', 'maxPollRecords', 'processDelayMs'])
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) throw new Error('unexpected argument ' + a)
    const name = a.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    if (!(name in args)) throw new Error('unknown option ' + a)
    if (name === 'commit') { args.commit = true; continue }
    const v = argv[++i]
    if (v === undefined) throw new Error('missing value for ' + a)
    args[name] = numeric.has(name) ? Number(v) : v
  }
  return args
}

function emit (obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function recordValue (tag, key, seq) {
  return `${tag}|${key}|${seq}|` + 'samsa-'.repeat(1 + seq % 7)
}

function * generate (tag, keys, perKey) {
  for (let seq = 0; seq < perKey; seq++) {
    for (let i = 0; i < keys; i++) {
      const key = 'k' + i
      yield { key, value: recordValue(tag, key, seq), seq }
    }
  }
}

function security (args) {
  const out = {}
  if (args.securityProtocol.endsWith('SSL')) {
    out.ssl = args.ca ? { ca: [require('fs').readFileSync(args.ca, 'utf-8')] } : true
  }
  if (args.saslMechanism) {
    out.sasl = { mechanism: args.saslMechanism.toLowerCase(), username: args.user, password: args.password }
  }
  return out
}

function client (args) {
  return new Kafka({
    ...security(args),
    clientId: 'samsa-conformance-kafkajs',
    brokers: [args.bootstrap],
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, level, label, log }) => {
      process.stderr.write(`${label} [${namespace}] ${log.message} ${JSON.stringify(log)}\n`)
    }
  })
}

const codecTypes = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

async function cmdCodecs (args) {
  return { client: CLIENT, codecs: Object.keys(codecTypes) }
}

async function cmdMetadata (args) {
  const admin = client(args).admin()
  await admin.connect()
  try {
    const cluster = await admin.describeCluster()
    const md = await admin.fetchTopicMetadata()
    const topics = {}
    for (const t of md.topics) topics[t.name] = t.partitions.length
    return {
      client: CLIENT,
      brokers: cluster.brokers.map(b => ({ id: b.nodeId, host: b.host, port: b.port })),
      topics,
      controller: cluster.controller,
      cluster_id: cluster.clusterId
    }
  } finally {
    await admin.disconnect()
  }
}

async function cmdCreate (args) {
  const admin = client(args).admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic: args.topic, numPartitions: args.partitions, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000
    })
    if (!created) throw new Error('createTopics returned false (topic already exists?)')
    return { client: CLIENT, created: args.topic }
  } finally {
    await admin.disconnect()
  }
}

async function cmdProduce (args) {
  if (!(args.codec in codecTypes)) throw new Error('unsupported codec ' + args.codec)
  const kafka = client(args)
  const admin = kafka.admin()
  await admin.connect()
  const md = await admin.fetchTopicMetadata({ topics: [args.topic] })
  await admin.disconnect()
  const partitionMetadata = md.topics[0].partitions
  // Choose partitions with kafkajs's own default partitioner up front, so that each
  // record's offset is known from its partition's baseOffset in the response.
  const partitioner = Partitioners.DefaultPartitioner()
  const messages = []
  for (const r of generate(args.tag, args.keys, args.perKey)) {
    const m = { key: r.key, value: r.value, headers: { seq: String(r.seq) } }
    m.partition = partitioner({ topic: args.topic, partitionMetadata, message: m })
    messages.push(m)
  }
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    const result = await producer.send({
      topic: args.topic,
      acks: -1,
      compression: codecTypes[args.codec],
      messages
    })
    const base = {}
    for (const r of result) {
      if (r.errorCode !== 0) throw new Error(`partition ${r.partition}: error ${r.errorCode}`)
      base[r.partition] = BigInt(r.baseOffset)
    }
    const next = {}
    const acks = messages.map(m => {
      const i = next[m.partition] || 0n
      next[m.partition] = i + 1n
      return { key: m.key, value: m.value, partition: m.partition, offset: Number(base[m.partition] + i) }
    })
    return { client: CLIENT, produced: messages.length, codec: args.codec, acks }
  } finally {
    await producer.disconnect()
  }
}

// txnCommits: whether the transaction of round seq commits (see common.py).
function txnCommits (seq) { return seq % 3 !== 1 }

async function cmdTransact (args) {
  const kafka = client(args)
  const producer = kafka.producer({
    transactionalId: args.txnId || 'samsa-conformance-kafkajs',
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 30000
  })
  await producer.connect()
  let committed = 0
  let aborted = 0
  try {
    for (let seq = 0; seq < args.perKey; seq++) {
      const messages = []
      for (let i = 0; i < args.keys; i++) {
        const key = 'k' + i
        messages.push({ key, value: recordValue(args.tag, key, seq), headers: { seq: String(seq) } })
      }
      const txn = await producer.transaction()
      await txn.send({ topic: args.topic, acks: -1, messages })
      if (txnCommits(seq)) {
        await txn.commit()
        committed += messages.length
      } else {
        await txn.abort()
        aborted += messages.length
      }
    }
    return { client: CLIENT, produced: committed, aborted }
  } finally {
    await producer.disconnect()
  }
}

function recordOf (partition, message) {
  const headers = {}
  for (const [k, v] of Object.entries(message.headers || {})) headers[k] = v == null ? null : v.toString()
  return {
    partition,
    offset: Number(message.offset),
    key: message.key == null ? null : message.key.toString(),
    value: message.value == null ? null : message.value.toString(),
    headers
  }
}

async function cmdConsume (args) {
  const kafka = client(args)
  const admin = kafka.admin()
  await admin.connect()
  const ends = await admin.fetchTopicOffsets(args.topic)
  await admin.disconnect()
  const pending = new Map()
  for (const p of ends) {
    if (BigInt(p.high) > BigInt(p.low)) pending.set(p.partition, BigInt(p.high))
  }
  const records = []
  if (pending.size > 0) {
    // read_committed ends short of the log end (aborted records and markers): it
    // stops once --expect records arrived.
    const committedOnly = args.isolation === 'read_committed'
    const consumer = kafka.consumer({
      groupId: args.group || `samsa-conformance-kafkajs-${process.pid}-${Date.now()}`,
      sessionTimeout: args.sessionTimeoutMs,
      heartbeatInterval: args.heartbeatIntervalMs,
      maxWaitTimeInMs: 200,
      readUncommitted: !committedOnly
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
    let finish
    const done = new Promise(resolve => { finish = resolve })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        records.push(recordOf(partition, message))
        const end = pending.get(partition)
        if (end !== undefined && BigInt(message.offset) + 1n >= end) pending.delete(partition)
        if (committedOnly && args.expect > 0 && records.length >= args.expect) pending.clear()
        if (pending.size === 0) finish()
      }
    })
    const limit = setTimeout(finish, Math.max(1, args.timeout - 5) * 1000)
    await done
    clearTimeout(limit)
    await consumer.disconnect()
  }
  return { client: CLIENT, records, incomplete_partitions: [...pending.keys()].sort() }
}

async function cmdMember (args) {
  if (args.instanceId) throw new Error('kafkajs has no static membership (group.instance.id)')
  if (args.assignor && args.assignor !== 'roundrobin') throw new Error('kafkajs has no assignor ' + args.assignor)
  const kafka = client(args)
  const opts = {
    groupId: args.group,
    sessionTimeout: args.sessionTimeoutMs,
    heartbeatInterval: args.heartbeatIntervalMs,
    maxWaitTimeInMs: 200
  }
  if (args.maxPollIntervalMs) opts.rebalanceTimeout = args.maxPollIntervalMs
  const consumer = kafka.consumer(opts)
  consumer.on(consumer.events.GROUP_JOIN, e => {
    const parts = (e.payload.memberAssignment[args.topic] || []).slice().sort((a, b) => a - b)
    emit({ ev: 'assignment', partitions: parts, member_id: e.payload.memberId })
  })
  consumer.on(consumer.events.CRASH, e => {
    emit({ ev: 'error', msg: 'crash: ' + (e.payload.error && e.payload.error.message) })
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  let stop
  const stopped = new Promise(resolve => { stop = resolve })
  process.on('SIGTERM', () => stop())
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      emit(Object.assign(recordOf(partition, message), { ev: 'record' }))
      if (args.processDelayMs) await new Promise(resolve => setTimeout(resolve, args.processDelayMs))
      if (args.commit) {
        const next = (BigInt(message.offset) + 1n).toString()
        await consumer.commitOffsets([{ topic: args.topic, partition, offset: next }])
        emit({ ev: 'commit', offsets: { [partition]: Number(next) } })
      }
    }
  })
  emit({ ev: 'ready' })
  await stopped
  await consumer.disconnect()
  emit({ ev: 'closed' })
  return null
}

const commands = {
  codecs: cmdCodecs,
  metadata: cmdMetadata,
  create: cmdCreate,
  produce: cmdProduce,
  transact: cmdTransact,
  consume: cmdConsume,
  member: cmdMember
}

async function main () {
  let args
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (e) {
    emit({ error: e.message })
    process.exit(2)
  }
  const fn = commands[args.command]
  if (!fn) {
    emit({ error: 'unknown command ' + args.command })
    process.exit(2)
  }
  if (args.command !== 'member') {
    // Hard deadline; members live until the test stops them.
    setTimeout(() => {
      emit({ error: `driver timeout after ${args.timeout}s` })
      process.exit(3)
    }, args.timeout * 1000)
  }
  try {
    const out = await fn(args)
    if (out !== null) emit(out)
    process.exit(0)
  } catch (e) {
    emit({ error: `${e.name}: ${e.message}` })
    process.exit(1)
  }
}

main()
