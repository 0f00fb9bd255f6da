import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHmac } from 'node:crypto';
import { isPrivateAddress, literalBlocked } from './address-guard';
import { backoffMs } from './backoff';
import { signature, signedString, verifySignature } from './signature';
import { postWebhook } from './webhook-sender';

describe('webhook backoff', () => {
  it.each([
    [1, 1000],
    [2, 2000],
    [3, 4000],
    [9, 256_000],
    [10, 300_000],
    [50, 300_000],
    [5000, 300_000],
  ])('retry %i waits %i ms (base 1 s, cap 5 min)', (attempt, ms) => {
    expect(backoffMs(attempt, 1000, 300_000)).toBe(ms);
  });
});

describe('webhook signature', () => {
  it('is HMAC-SHA256 over `${timestamp}.${body}`, hex, prefixed sha256=', () => {
    const body = '{"op":"message.send"}';
    expect(signedString('1700000000', body)).toBe(`1700000000.${body}`);
    const hex = createHmac('sha256', 'k').update(`1700000000.${body}`).digest('hex');
    expect(signature('k', '1700000000', body)).toBe(`sha256=${hex}`);
    expect(verifySignature('k', '1700000000', body, `sha256=${hex}`)).toBe(true);
    expect(verifySignature('k', '1700000001', body, `sha256=${hex}`)).toBe(false);
    expect(verifySignature('other', '1700000000', body, `sha256=${hex}`)).toBe(false);
    expect(verifySignature('k', '1700000000', body, 'sha256=short')).toBe(false);
  });
});

describe('webhook address guard', () => {
  it.each([
    ['127.0.0.1', true],
    ['10.1.2.3', true],
    ['172.16.0.1', true],
    ['172.32.0.1', false],
    ['192.168.1.1', true],
    ['169.254.169.254', true],
    ['100.64.0.1', true],
    ['0.0.0.0', true],
    ['224.0.0.1', true],
    ['8.8.8.8', false],
    ['93.184.216.34', false],
    ['::1', true],
    ['::', true],
    ['fd00::1', true],
    ['fe80::1', true],
    ['::ffff:127.0.0.1', true],
    ['::ffff:8.8.8.8', false],
    ['2606:4700:4700::1111', false],
    ['not-an-ip', true],
  ])('%s private: %s', (address, blocked) => {
    expect(isPrivateAddress(address)).toBe(blocked);
  });

  it('checks IP-literal hosts (no DNS lookup happens for them)', () => {
    expect(literalBlocked('127.0.0.1')).toBe('127.0.0.1');
    expect(literalBlocked('[::1]')).toBe('::1');
    expect(literalBlocked('8.8.8.8')).toBeNull();
    expect(literalBlocked('hooks.example.com')).toBeNull();
  });
});

describe('postWebhook', () => {
  let server: http.Server;
  let port = 0;
  let status = 200;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(status, status === 302 ? { location: 'http://8.8.8.8/' } : {}).end('x'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const post = (host: string, allowPrivate: boolean) =>
    postWebhook(`http://${host}:${port}/hook`, '{}', {}, { timeoutMs: 2000, allowPrivate });

  it('2xx acknowledges; other statuses and redirects (not followed) are failed attempts', async () => {
    status = 204;
    expect(await post('127.0.0.1', true)).toEqual({ ok: true, status: 204, error: null });
    status = 503;
    expect(await post('127.0.0.1', true)).toEqual({ ok: false, status: 503, error: 'HTTP 503' });
    status = 302;
    expect(await post('127.0.0.1', true)).toEqual({ ok: false, status: 302, error: 'HTTP 302' });
  });

  it('refuses loopback by address and by name (the resolved address) unless allowed', async () => {
    status = 200;
    const literal = await post('127.0.0.1', false);
    expect(literal).toMatchObject({ ok: false, status: null });
    expect(literal.error).toMatch(/private or loopback/);
    const named = await post('localhost', false);
    expect(named).toMatchObject({ ok: false, status: null });
    expect(named.error).toMatch(/private or loopback/);
    expect((await post('127.0.0.1', true)).ok).toBe(true);
  });
});
