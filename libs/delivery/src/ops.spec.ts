import { createHash } from 'node:crypto';
import { deliveryId } from './ops';

describe('deliveryId', () => {
  it('is the same UUID-shaped SHA-256 prefix as before the one-shot hash (ids already stored stay valid)', () => {
    expect(deliveryId('run-1', 3)).toBe('079a48da-131d-8c13-9829-d7e124b50bf1');
    const h = createHash('sha256').update('run-1:3').digest('hex');
    expect(deliveryId('run-1', 3).replace(/-/g, '').slice(0, 12)).toBe(h.slice(0, 12));
  });

  it('depends only on the run and the sequence', () => {
    expect(deliveryId('run-1', 3)).toBe(deliveryId('run-1', 3));
    expect(deliveryId('run-1', 4)).not.toBe(deliveryId('run-1', 3));
    expect(deliveryId('run-2', 3)).not.toBe(deliveryId('run-1', 3));
  });
});
