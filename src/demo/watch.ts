// Prints the messages of a demo thread as they are posted: a WebSocket client of /stream.
//
//   node dist/demo/watch.js ws://localhost:8080/threads/t1/stream
import WebSocket from "ws"

const url = process.argv[2]
if (url === undefined) {
  process.stderr.write("usage: node dist/demo/watch.js ws://<pinboard>/threads/<id>/stream\n")
  process.exit(2)
}
const socket = new WebSocket(url)
socket.on("open", () => process.stdout.write(`watching ${url} (Ctrl-C to stop)\n`))
socket.on("message", (data) => process.stdout.write(`${String(data)}\n`))
socket.on("unexpected-response", (_req, res) => {
  process.stderr.write(`upgrade refused: ${res.statusCode}\n`)
  process.exit(1)
})
socket.on("close", (code) => {
  process.stdout.write(`closed (${code})\n`)
  process.exit(0)
})
socket.on("error", (error) => {
  process.stderr.write(`${error.message}\n`)
  process.exit(1)
})
