/**
 * `make` of a statement's text, made once per text: the service's statements are parameterised,
 * so they are a few dozen texts; past 1,000 (texts built at run time) a value is made each time.
 */
export const cachedByText = <A>(make: (sql: string) => A): (sql: string) => A => {
  const byText = new Map<string, A>()
  return (sql) => {
    let value = byText.get(sql)
    if (value === undefined) {
      value = make(sql)
      if (byText.size < 1000) byText.set(sql, value)
    }
    return value
  }
}
