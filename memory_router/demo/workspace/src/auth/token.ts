// parseAuthToken: verify a JWT access token and return its claims.
export function parseAuthToken(header: string): Claims {
  const token = header.replace(/^Bearer /, "");
  return verifyJwt(token, { audience: "shopfront-api", maxAgeSeconds: 900 });
}
