import { randomJson, randomObject, runContextFixture, seededRandom, type JsonShape } from './wire-cases';

const SHAPE: JsonShape = {
  kinds: ['null', 'bool', 'number', 'string', 'undefined', 'array', 'object'],
  leafKinds: 5,
  nestUntil: 2,
  keys: ['a', '__proto__'],
  strings: ['s'],
  parsedObjects: false,
};

/** The deepest nesting of arrays and objects in a value (a leaf is 0). */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) {
    return 0;
  }
  return 1 + Math.max(0, ...Object.values(value).map(depthOf));
}

describe('wire test cases', () => {
  it('gives the same numbers for the same seed and other numbers for another', () => {
    const a = seededRandom(16);
    const b = seededRandom(16);
    const c = seededRandom(17);
    const first = Array.from({ length: 50 }, a);
    expect(Array.from({ length: 50 }, b)).toEqual(first);
    expect(Array.from({ length: 50 }, c)).not.toEqual(first);
    expect(first.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it('picks only the kinds, strings and keys of the shape', () => {
    const r = seededRandom(1);
    const onlyStrings: JsonShape = { ...SHAPE, kinds: ['string'], leafKinds: 1 };
    for (let i = 0; i < 50; i++) {
      expect(randomJson(r, onlyStrings, 0)).toBe('s');
    }
    const objects: JsonShape = { ...SHAPE, kinds: ['null', 'object'], leafKinds: 1, keys: ['k'] };
    const parsed: JsonShape = { ...objects, parsedObjects: true };
    const keys = (v: unknown): string[] =>
      typeof v === 'object' && v !== null ? [...Object.keys(v), ...Object.values(v).flatMap(keys)] : [];
    for (let i = 0; i < 50; i++) {
      expect(keys(randomObject(r, objects, 0)).every((k) => k === 'k')).toBe(true);
      expect(keys(randomJson(r, parsed, 0)).every((k) => k === 'k')).toBe(true);
    }
  });

  it('nests no deeper than nestUntil allows', () => {
    const r = seededRandom(2);
    let deepest = 0;
    for (let i = 0; i < 500; i++) {
      const d = depthOf(randomJson(r, SHAPE, 0));
      deepest = Math.max(deepest, d);
    }
    // Depths 0, 1 and 2 may nest (a value at depth 3 is a leaf): three levels of containers at most.
    expect(deepest).toBe(3);
  });

  it('makes objects as JSON.parse does when the shape asks: __proto__ an own key, no undefined, no -0', () => {
    const shape: JsonShape = {
      ...SHAPE,
      kinds: ['number', 'undefined', 'object'],
      leafKinds: 2,
      keys: ['__proto__', 'x'],
      parsedObjects: true,
    };
    const r = seededRandom(3);
    let ownProto = 0;
    for (let i = 0; i < 300; i++) {
      const v = randomJson(r, shape, 0);
      if (typeof v === 'object' && v !== null) {
        expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
        ownProto += Object.prototype.hasOwnProperty.call(v, '__proto__') ? 1 : 0;
        expect(Object.values(v).some((x) => x === undefined || Object.is(x, -0))).toBe(false);
      }
    }
    expect(ownProto).toBeGreaterThan(0);
  });

  it('hands out a fresh run context each time', () => {
    const a = runContextFixture();
    a.run_id = 'changed';
    expect(runContextFixture().run_id).toBe('r1');
  });
});
