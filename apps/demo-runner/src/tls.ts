import * as fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';

/**
 * Channel credentials from the environment: plaintext unless `RUNNERHOST_TLS_CA_FILE` (the CA
 * that signed the host's certificate) is set; `RUNNERHOST_TLS_CERT_FILE` + `RUNNERHOST_TLS_KEY_FILE`
 * add a client certificate, for hosts that require one (GRPC_TLS_CLIENT_CA_FILE).
 */
export function channelCredentials(env: NodeJS.ProcessEnv): grpc.ChannelCredentials {
  const read = (name: string): Buffer | null => {
    const file = env[name];
    if (!file) {
      return null;
    }
    try {
      return fs.readFileSync(file);
    } catch (e) {
      throw new Error(`${name}=${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
    }
  };
  const ca = read('RUNNERHOST_TLS_CA_FILE');
  const cert = read('RUNNERHOST_TLS_CERT_FILE');
  const key = read('RUNNERHOST_TLS_KEY_FILE');
  if (!cert !== !key) {
    throw new Error('RUNNERHOST_TLS_CERT_FILE and RUNNERHOST_TLS_KEY_FILE go together');
  }
  if (!ca && !cert) {
    return grpc.credentials.createInsecure();
  }
  return grpc.credentials.createSsl(ca, key, cert);
}
