// The auth middleware: token -> session (session store) -> user (UserService).
export async function authMiddleware(req: Request): Promise<void> {
  const claims = parseAuthToken(req.headers.authorization ?? "");
  req.session = await sessionStore.load(claims.sid);
  req.user = await userService.findById(claims.sub);
}
