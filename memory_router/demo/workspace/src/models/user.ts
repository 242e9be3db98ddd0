// UserService: user lookup for the auth middleware, OrderController and the admin API.
export class UserService {
  async findById(id: string): Promise<User | null> { return db.users.find(id); }
}
