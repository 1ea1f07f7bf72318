// Preloaded into the fixture workers (`node --import`): the WebSocket fuzz sends them invalid
// frames on purpose, and test/fixtures/worker.mjs has no 'error' listener on its WebSockets,
// so `ws` would throw from emit and end the worker. Under the fuzz the worker survives; the
// line printed lets the run count how often.
process.on("uncaughtException", (error: Error) => {
  process.stdout.write(`fuzz guard: worker survived ${error.name}: ${error.message.slice(0, 200)}\n`)
})
