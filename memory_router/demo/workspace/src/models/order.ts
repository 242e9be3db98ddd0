// OrderController publishes payment.requested; PaymentService consumes it.
export class OrderController {
  constructor(private readonly payments: PaymentQueue) {}
  async create(order: NewOrder) { await this.payments.publish("payment.requested", order); }
}
