import { writeFileSync } from "node:fs"
import { join } from "node:path"

/** The benchmark's workloads, their wrk scripts written into `folder`, calling with `apiKey`. */
export const makeWorkloads = (folder: string, apiKey: string, tag: string) => {
  const lua = (name: string, body: string) => {
    const path = join(folder, `${name}.lua`)
    writeFileSync(path, body)
    return path
  }
  const auth = `wrk.headers["Authorization"] = "Bearer ${apiKey}"\n`
  return [
    { name: "list, limit 20", path: "/v1/pets?limit=20", script: lua(`list20-${tag}`, auth) },
    { name: "list, limit 100, status", path: "/v1/pets?limit=100&status=available", script: lua(`list100-${tag}`, auth) },
    {
      name: "get by id",
      path: "/v1/pets/1",
      script: lua(`get-${tag}`, auth + `request = function() return wrk.format("GET", "/v1/pets/" .. math.random(1, 10000)) end\n`)
    },
    {
      name: "create",
      path: "/v1/pets",
      script: lua(
        `create-${tag}`,
        auth + `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n` +
          `wrk.body = '{"name":"Bench","categoryId":7,"status":"pending"}'\n`
      )
    },
    { name: "401 without key", path: "/v1/pets", script: lua(`unauthorized-${tag}`, "") }
  ]
}
