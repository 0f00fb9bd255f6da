import { boolean, component, list, object, oneOf, openApiComponents, optional, text, type Infer } from './body-schema';

/** Compile-time equality: `expectType<A, B>(true)` fails to build when A and B differ. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const expectType = <A, B>(ok: Equal<A, B>): Equal<A, B> => ok;

describe('body schema builders', () => {
  const item = component('ItemDto', object({ kind: oneOf(['a', 'b'] as const), on: optional(boolean()) }, ['kind']));
  const body = component(
    'BodyDto',
    object({ name: text(10, true), items: optional(list(item, 3)), note: optional(text()) }, ['name']),
  );

  it('infer the type of the values a schema admits: required keys present, the others optional', () => {
    expect(
      expectType<Infer<typeof body>, { name: string; items?: { kind: 'a' | 'b'; on?: boolean }[]; note?: string }>(
        true,
      ),
    ).toBe(true);
  });

  it('build plain JSON schema (optional: nullable, an enum also admits null)', () => {
    expect(body).toEqual({
      type: 'object',
      properties: {
        name: { maxLength: 10, minLength: 1, type: 'string' },
        items: { maxItems: 3, type: 'array', items: item, nullable: true },
        note: { type: 'string', nullable: true },
      },
      required: ['name'],
      additionalProperties: false,
    });
    expect(optional(oneOf(['x'])).enum).toEqual(['x', null]);
  });

  it('show named nested objects as OpenAPI components', () => {
    const c = openApiComponents(body);
    expect(Object.keys(c).sort()).toEqual(['BodyDto', 'ItemDto']);
    expect(c.ItemDto).toMatchObject({ required: ['kind'], additionalProperties: false });
  });
});
