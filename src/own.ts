// Reading and writing maps by own key only.
//
// Maps here are plain objects keyed by names from the wire or from users:
// resource names, Secret keys, context keys, labels, CRD properties. A name
// such as __proto__ or constructor must read and write as any other: an
// assignment to __proto__ would set the map's prototype and lose the entry,
// and a plain read of a missing __proto__ or constructor would find
// Object.prototype's.

/** getOwn reads map[key] when key is map's own, else undefined. */
export function getOwn<T>(map: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(map, key) ? map[key] : undefined;
}

/** setOwn sets map[key] as an own property, also for the key __proto__ (which an assignment would make map's prototype). */
export function setOwn<T>(map: Record<string, T>, key: string, v: T): void {
  if (key === "__proto__") Object.defineProperty(map, key, { value: v, writable: true, enumerable: true, configurable: true });
  else map[key] = v;
}
