// `npm run docs`: writes the generated documentation.
import { writeFileSync } from "node:fs"
import { renderErrorsDoc } from "./ErrorsDoc.js"

writeFileSync(new URL("../../docs/errors.md", import.meta.url), renderErrorsDoc())
process.stdout.write("wrote docs/errors.md\n")
