import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import type { Page } from "playwright-core"
import { type Browser, launchChromium } from "./support/Chromium.js"
import { startServer, temporaryFolder } from "./support/ServerProcess.js"

/**
 * The docs page in a real browser, served by the real server with its Content-Security-Policy on,
 * and no network: every request that leaves the server's origin is refused and recorded.
 */
let browser: Browser
let server: Awaited<ReturnType<typeof startServer>>
let folder: ReturnType<typeof temporaryFolder>
/** What the server calls itself by default (PUBLIC_BASE_URL is http://localhost:$PORT). */
let origin: string

beforeAll(async () => {
  folder = temporaryFolder()
  server = await startServer({ DATABASE_URL: join(folder.path, "petstore.db") })
  origin = `http://localhost:${new URL(server.url).port}`
  browser = await launchChromium()
}, 600_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  folder?.[Symbol.dispose]()
})

interface Visit {
  readonly page: Page
  readonly outside: Array<string>
  readonly errors: Array<string>
  readonly violations: Array<{ readonly directive: string; readonly blocked: string }>
}

const visit = async (url: string): Promise<Visit> => {
  const page = await browser.context.newPage()
  const visit: Visit = { page, outside: [], errors: [], violations: [] }
  await page.route((target) => target.origin !== origin, (route) => {
    visit.outside.push(route.request().url())
    return route.abort()
  })
  page.on("console", (message) => {
    if (message.type() === "error") visit.errors.push(message.text())
  })
  page.on("pageerror", (error) => visit.errors.push(String(error)))
  await page.exposeFunction(
    "reportViolation",
    (directive: string, blocked: string) => visit.violations.push({ directive, blocked })
  )
  await page.addInitScript(() =>
    document.addEventListener(
      "securitypolicyviolation",
      (event) =>
        (window as unknown as { reportViolation: (d: string, b: string) => void }).reportViolation(
          event.violatedDirective,
          event.blockedURI
        )
    )
  )
  await page.goto(url)
  return visit
}

/** Each group's operations, by summary. */
const operations = {
  pets: ["List animals", "Add an animal", "Fetch one animal (deprecated)"],
  health: ["Liveness", "Readiness"]
}

/** Scalar's section of listPets: its id ends with its fragment (the method's case is Scalar's version's). */
const listPetsSelector = `[id$="tag/pets/get/v1/pets" i]`
const listPetsSection = (page: Page) => page.locator(listPetsSelector)

describe("the docs page in a browser", () => {
  it("renders every operation under its Content-Security-Policy, with no network and no blocked script", async () => {
    const { errors, outside, page, violations } = await visit(`${origin}/docs`)
    try {
      // The first group is open; the other opens from the sidebar.
      for (const summary of operations.pets) {
        await page.getByRole("heading", { name: summary }).first().waitFor({ state: "visible", timeout: 60_000 })
      }
      await page.getByText("health", { exact: true }).first().click()
      for (const summary of operations.health) {
        await page.getByRole("heading", { name: summary }).first().waitFor({ state: "visible", timeout: 30_000 })
      }
      expect(outside).toEqual([])
      expect(errors).toEqual([])
      // The one refusal is a probe for `new Function` (in the viewer's Zod), which is caught and
      // answered by falling back; no script, style or WebAssembly the page needs is blocked.
      expect(violations.filter(({ blocked }) => blocked !== "eval")).toEqual([])
    } finally {
      await page.close()
    }
  }, 120_000)

  it("calls this instance by default: listed first as its environment, and in every sample", async () => {
    const { page } = await visit(`${origin}/docs`)
    try {
      const section = listPetsSection(page)
      await section.getByText(`curl '${origin}/v1/pets`, { exact: false }).first().waitFor({ timeout: 30_000 })
      const text = await page.evaluate(() => document.body.innerText)
      expect(text).toMatch(new RegExp(`Server:?\\s+${origin.replace(/\./g, "\\.")}\\s+This instance \\(staging\\)`))
      expect(text).not.toContain("petstore.example.com/v1")
    } finally {
      await page.close()
    }
  }, 120_000)

  it("getPet's deprecation link opens the listPets section", async () => {
    const response = await fetch(`${server.url}/v1/pets/1`)
    const link = /^<([^>]+)>; rel="deprecation"/.exec(response.headers.get("link") ?? "")?.[1]
    expect(link).toBe(`${origin}/docs#tag/pets/get/v1/pets`)
    const { page } = await visit(link!)
    try {
      const section = listPetsSection(page)
      await section.waitFor({ state: "visible", timeout: 30_000 })
      // Scrolled to it: its heading is at the top of the window.
      await page.waitForFunction(
        (selector) => {
          const top = document.querySelector(selector)?.getBoundingClientRect().top
          return top !== undefined && top >= 0 && top < 200
        },
        listPetsSelector,
        { timeout: 30_000 }
      )
      expect(await section.getByRole("heading").first().innerText()).toContain("List animals")
    } finally {
      await page.close()
    }
  }, 120_000)
})
