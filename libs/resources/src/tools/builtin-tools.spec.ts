import { DomainError } from '@libs/protocol';
import { BUILTINS, type BuiltinContext } from './builtin-tools';

const ctx: BuiltinContext = { signal: new AbortController().signal, maxResultBytes: 1 << 20 };
const currentTime = BUILTINS.get('current_time')!;

describe('built-in current_time', () => {
  it.each([
    [{}, 'UTC'],
    [{ timezone: 'Europe/Paris' }, 'Europe/Paris'],
    [{ timezone: 'Asia/Kolkata' }, 'Asia/Kolkata'],
    [{ timezone: 'Europe/Paris' }, 'Europe/Paris'], // a second call uses the cached formatter
  ])('answers the local time of %p in %s', async (args, zone) => {
    const r = await currentTime.run(args, ctx);
    const s = r.structured_content as { iso: string; timezone: string; local: string };
    expect(r.is_error).toBe(false);
    expect(s.timezone).toBe(zone);
    expect(s.local).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    const expected = new Intl.DateTimeFormat('sv-SE', { timeZone: zone, dateStyle: 'short', timeStyle: 'medium' });
    expect(s.local).toBe(expected.format(new Date(s.iso)));
    expect(r.content).toEqual([{ type: 'text', text: `${s.local} ${zone}` }]);
  });

  it.each(['Mars/Olympus', 'not a zone'])('refuses the unknown time zone %p naming the parameter', async (timezone) => {
    for (let i = 0; i < 2; i++) {
      // Twice: an unknown zone is never cached as valid.
      await expect(Promise.resolve().then(() => currentTime.run({ timezone }, ctx))).rejects.toEqual(
        new DomainError('invalid_argument', `parameters.timezone: unknown time zone "${timezone}"`, {
          field: 'parameters.timezone',
        }),
      );
    }
  });
});
